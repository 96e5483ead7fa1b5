//go:build !linux

package caps

// Get returns ErrUnsupported: there are no Linux capabilities here.
func Get() (Sets, error) { return Sets{}, ErrUnsupported }

// Set returns ErrUnsupported: there are no Linux capabilities here.
func Set(Sets) error { return ErrUnsupported }

// InBounding is false: there is no bounding set here.
func InBounding(int) bool { return false }

// FileCaps returns ErrUnsupported: there are no file capabilities here.
func FileCaps(string) (bool, error) { return false, ErrUnsupported }
