# Test harness only: Debian's torch 1.13 on Python 3.11 cannot start
# torchrun, because iterating an IntFlag no longer yields its zero member
# and Std.from_str("0") returns None. Patch that one function when torch's
# module is imported; nothing else is touched, and ncclrun never is.
import importlib.abc
import importlib.util
import re
import sys

_NAME = "torch.distributed.elastic.multiprocessing.api"


class _PatchStd(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _NAME:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def patched(module):
            exec_module(module)
            std, orig = module.Std, module.Std.from_str

            def from_str(vm):
                if re.match(module._VALUE_REGEX, vm):
                    return std(int(vm))
                if re.match(module._MAPPING_REGEX, vm):
                    return {int(i): std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
                return orig(vm)

            std.from_str = staticmethod(from_str)

        spec.loader.exec_module = patched
        return spec


sys.meta_path.insert(0, _PatchStd())
