package main

import (
	"strings"
	"testing"
)

// Promise: a bad flag value gives one line `ncclrun: ...` naming the flag
// and exit status 2, before any preflight output and without starting CMD
// (complements TestUsageErrorsExit2WithOneLine).
func TestFaultBadFlagValuesOneLineExit2(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		contains string
	}{
		{[]string{"--memlock", "foo", "--", "sh", "-c", "echo started"}, "--memlock"},
		{[]string{"--memlock", "-5", "true"}, "--memlock"},
		{[]string{"--memlock", "99999999999999999999", "true"}, "--memlock"},
		{[]string{"--kill-after", "x", "true"}, "kill-after"},
		{[]string{"--kill-after", "-1s", "true"}, "--kill-after"},
		{[]string{"env", "--format", "yaml"}, "--format"},
		{[]string{"--drop-cap", "NOPE", "true"}, "NOPE"},
		{[]string{"--user", "nosuchuser", "--", "sh", "-c", "echo started"}, "--user"},
		{[]string{"--user", "root:nosuchgroup", "true"}, "--user"},
		{[]string{"--user", "", "true"}, ""},
		{[]string{"--nccl-ib=maybe", "true"}, "--nccl-ib"},
		{[]string{"--probe", "1ZiB", "doctor"}, "--probe"},
		{[]string{"--min-memlock", "0x10", "true"}, "--min-memlock"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := ncclrun(t, tc.args...)
			if tc.contains == "" { // an empty value means "not set": CMD runs
				if r.code != 0 {
					requireUsage(t, r, "")
				}
				return
			}
			requireUsage(t, r, tc.contains)
		})
	}
}
