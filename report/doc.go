// Package report writes what gpuprof found for people and programs: the
// live line while a job runs, the summary when it ends, and one JSON object
// per step for files.
package report
