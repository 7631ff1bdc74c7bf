// Package probetest writes on-disk signatures into test files (sparse
// files standing for devices), laid out as the tools that make them do,
// for tests of the code that must refuse to overwrite them.
package probetest
