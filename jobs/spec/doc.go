// Package spec parses and validates what users type about batch jobs: time
// limits, array specs, dependencies and job ids. Every parser rejects bad
// input with an error that quotes the offending value.
package spec
