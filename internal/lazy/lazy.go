// Package lazy holds package-level values that are made on their first
// use. A package-level variable set by a call (regexp.MustCompile, a
// table built by a function) runs at every start of every command, before
// main, and most starts use few of them; a Value or Regexp is plain data
// until something asks for it, so the package needs no code at start.
package lazy

import (
	"regexp"
	"sync"
)

// Value is the value New returns, made on the first Get. Declare it as
// a literal: var v = &lazy.Value[T]{New: func() T { ... }}. If New
// panics, every Get panics with the same value, as sync.OnceValue's
// function does.
type Value[T any] struct {
	New   func() T
	once  sync.Once
	v     T
	panic any
}

// Get returns the value, making it on the first call.
func (l *Value[T]) Get() T {
	do(&l.once, &l.panic, func() { l.v = l.New() })
	return l.v
}

// Regexp is Expr compiled on the first Get, which panics (then and on
// every later Get) if it does not compile, as regexp.MustCompile would at
// start; each package's tests use every one of its expressions.
type Regexp struct {
	Expr  string
	once  sync.Once
	re    *regexp.Regexp
	panic any
}

// Get returns the compiled expression, compiling it on the first call.
func (r *Regexp) Get() *regexp.Regexp {
	do(&r.once, &r.panic, func() { r.re = regexp.MustCompile(r.Expr) })
	return r.re
}

// do runs f once, keeping in *p what it panicked with; then, and on
// every later call, it panics with that again.
func do(once *sync.Once, p *any, f func()) {
	once.Do(func() {
		defer func() { *p = recover() }()
		f()
	})
	if *p != nil {
		panic(*p)
	}
}
