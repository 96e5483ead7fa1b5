# Test-harness patch: Debian's torch 1.13 on Python 3.11 cannot start torchrun,
# because iterating an IntFlag skips NONE (0), so Std.from_str("0") is None.
import importlib.abc, sys

def _patch(mod):
    Std = mod.Std
    orig = Std.from_str.__func__
    def from_str(cls, vm):
        r = orig(cls, vm)
        if r is None:
            return cls(int(vm))
        if isinstance(r, dict):
            return {k: (cls(0) if v is None else v) for k, v in r.items()}
        return r
    Std.from_str = classmethod(from_str)

class _Finder(importlib.abc.MetaPathFinder):
    name = "torch.distributed.elastic.multiprocessing.api"
    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        import importlib.util
        spec = importlib.util.find_spec(fullname)
        loader = spec.loader
        orig_exec = loader.exec_module
        def exec_module(module):
            orig_exec(module)
            _patch(module)
        loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, _Finder())
