// Times Porcupine on a history written by aidememo-sim (bench/sim.py runs it when a Go
// toolchain and a Porcupine checkout are present; it is never part of CI).
//
// Usage: go run . HISTORY.jsonl TIMEOUT_SECONDS
// Prints one JSON line: {"verdict": "Ok"|"Illegal"|"Unknown", "seconds": s, "cpu_seconds": s,
// "operations": n}: the check's wall time, and the process's CPU time over it (all threads).
// The model is the compare-and-swap register of simulations/linearizability/register.py: read/write/cas per
// "key", starting at the header's "init" (0 when absent), values compared as JSON numbers.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"
)

type input struct {
	Op       string  `json:"op"`
	Key      string  `json:"key"`
	Value    float64 `json:"value"`
	Expected float64 `json:"expected"`
	New      float64 `json:"new"`
}

type output struct {
	Value *float64 `json:"value"`
	Ok    bool     `json:"ok"`
}

type line struct {
	History string          `json:"history"`
	Init    *float64        `json:"init"`
	Client  *int            `json:"client"`
	Input   input           `json:"input"`
	Output  *output         `json:"output"`
	Call    int64           `json:"call"`
	Return  *int64          `json:"return"`
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: go run . HISTORY.jsonl TIMEOUT_SECONDS")
		os.Exit(2)
	}
	file, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	timeout, err := strconv.ParseFloat(os.Args[2], 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	init := 0.0
	var ops []porcupine.Operation
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 1<<20), 1<<26)
	for scanner.Scan() {
		var l line
		if err := json.Unmarshal(scanner.Bytes(), &l); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if l.Client == nil {
			if l.Init != nil {
				init = *l.Init
			}
			continue
		}
		if l.Output == nil || l.Return == nil {
			fmt.Fprintln(os.Stderr, "Porcupine has no unknown outputs; this history has one")
			os.Exit(2)
		}
		ops = append(ops, porcupine.Operation{ClientId: *l.Client, Input: l.Input, Call: l.Call, Output: *l.Output, Return: *l.Return})
	}
	model := porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byKey := map[string][]porcupine.Operation{}
			for _, op := range history {
				key := op.Input.(input).Key
				byKey[key] = append(byKey[key], op)
			}
			keys := make([]string, 0, len(byKey))
			for k := range byKey {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			parts := make([][]porcupine.Operation, 0, len(keys))
			for _, k := range keys {
				parts = append(parts, byKey[k])
			}
			return parts
		},
		Init: func() interface{} { return init },
		Step: func(state, in, out interface{}) (bool, interface{}) {
			st, inp, o := state.(float64), in.(input), out.(output)
			switch inp.Op {
			case "read":
				return o.Value != nil && *o.Value == st, st
			case "write":
				return true, inp.Value
			case "cas":
				if o.Ok {
					return st == inp.Expected, inp.New
				}
				return st != inp.Expected, st
			}
			return false, st
		},
		Equal: func(a, b interface{}) bool { return a.(float64) == b.(float64) },
	}
	before := cpuSeconds()
	started := time.Now()
	result := porcupine.CheckOperationsTimeout(model, ops, time.Duration(timeout*float64(time.Second)))
	took := time.Since(started).Seconds()
	cpu := cpuSeconds() - before
	fmt.Printf("{\"verdict\": %q, \"seconds\": %.6f, \"cpu_seconds\": %.6f, \"operations\": %d}\n",
		string(result), took, cpu, len(ops))
}

func cpuSeconds() float64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return float64(usage.Utime.Nano()+usage.Stime.Nano()) / 1e9
}
