// Package spec parses and validates what users type about batch jobs: time
// limits, array specs, dependencies, job ids and the job's environment
// (--export, --env). Every parser rejects bad
// input with an error that quotes the offending value.
package spec
