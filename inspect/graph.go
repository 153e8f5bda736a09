package inspect

import (
	"context"
	"sort"
)

// Graph is who waits for whom across objects and processes: an edge from
// every waiting owner to every holder of the object it waits for, and the
// cycles among them. A cycle is a distributed deadlock (say two services
// that take two locks in opposite orders): none of its owners can
// proceed until a lease runs out or a wait gives up.
//
// Locks only: every waiter of a lock waits for all of its holders (one,
// or a read-write lock's readers), so a cycle is a deadlock for sure.
// Owners, not clients, are the nodes: two goroutines of one process are
// two owners, and one of them waiting for the other is no deadlock. An
// owner that holds one lock and waits for another with the first lease's
// context (as the runtime's re-entry does) is one node.
type Graph struct {
	Edges  []Edge   `json:"edges"`
	Cycles [][]Edge `json:"cycles,omitempty"`
}

// Edge says Waiter waits for Holder, which holds Key (of Object).
type Edge struct {
	Waiter       string `json:"waiter"`
	WaiterClient string `json:"waiterClient"`
	Holder       string `json:"holder"`
	HolderClient string `json:"holderClient"`
	Object       string `json:"object"`
	Key          string `json:"key"`
}

// WaitFor reads every object (a Snapshot) and returns its wait-for graph.
func (in *Inspector) WaitFor(ctx context.Context) (*Graph, error) {
	snap, err := in.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	var insts []*Instance
	for _, o := range snap.Objects {
		insts = append(insts, o.Instances...)
	}
	return NewGraph(insts), nil
}

// NewGraph builds the wait-for graph of the instances' waiters and
// holders and finds its cycles.
func NewGraph(insts []*Instance) *Graph {
	g := &Graph{Edges: []Edge{}}
	for _, inst := range insts {
		holders, waiters := kindOf(inst.Kind).waitsFor(inst)
		for _, w := range waiters {
			for _, h := range holders {
				if h.Owner == w.Owner || w.Side == "read" && h.Side == "read" {
					continue // a re-entry waits for nobody; readers share
				}
				g.Edges = append(g.Edges, Edge{
					Waiter: w.Owner, WaiterClient: w.Client, Holder: h.Owner, HolderClient: h.Client,
					Object: inst.Object, Key: inst.Key,
				})
			}
		}
	}
	sort.Slice(g.Edges, func(i, j int) bool {
		a, b := g.Edges[i], g.Edges[j]
		if a.Waiter != b.Waiter {
			return a.Waiter < b.Waiter
		}
		if a.Holder != b.Holder {
			return a.Holder < b.Holder
		}
		return a.Key < b.Key
	})
	g.Cycles = Cycles(g.Edges)
	return g
}

// Cycles returns one cycle for every strongly connected group of owners
// that wait for one another (Tarjan's algorithm), each as the edges from
// its smallest owner round back to it, sorted by that owner.
func Cycles(edges []Edge) [][]Edge {
	out := map[string][]Edge{}
	for _, e := range edges {
		out[e.Waiter] = append(out[e.Waiter], e)
	}
	var nodes []string
	seen := map[string]bool{}
	for _, e := range edges {
		for _, n := range []string{e.Waiter, e.Holder} {
			if !seen[n] {
				seen[n] = true
				nodes = append(nodes, n)
			}
		}
	}
	sort.Strings(nodes)

	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var sccs [][]string
	next := 0
	var strong func(v string)
	strong = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, e := range out[v] {
			w := e.Holder
			if _, ok := index[w]; !ok {
				strong(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var scc []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				scc = append(scc, w)
				if w == v {
					break
				}
			}
			sccs = append(sccs, scc)
		}
	}
	for _, v := range nodes {
		if _, ok := index[v]; !ok {
			strong(v)
		}
	}

	var cycles [][]Edge
	for _, scc := range sccs {
		in := map[string]bool{}
		for _, n := range scc {
			in[n] = true
		}
		sort.Strings(scc)
		start := scc[0]
		if len(scc) == 1 && !selfLoop(out[start]) {
			continue
		}
		if c := pathBack(start, out, in); c != nil {
			cycles = append(cycles, c)
		}
	}
	sort.Slice(cycles, func(i, j int) bool { return cycles[i][0].Waiter < cycles[j][0].Waiter })
	return cycles
}

func selfLoop(es []Edge) bool {
	for _, e := range es {
		if e.Holder == e.Waiter {
			return true
		}
	}
	return false
}

// pathBack finds a shortest cycle through start inside one strongly
// connected group (breadth first, so the report is as short as it can be).
func pathBack(start string, out map[string][]Edge, in map[string]bool) []Edge {
	prev := map[string]Edge{}
	queue := []string{start}
	visited := map[string]bool{}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, e := range out[v] {
			if !in[e.Holder] {
				continue
			}
			if e.Holder == start {
				path := []Edge{e}
				for at := v; at != start; at = prev[at].Waiter {
					path = append(path, prev[at])
				}
				for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
					path[i], path[j] = path[j], path[i]
				}
				return path
			}
			if !visited[e.Holder] {
				visited[e.Holder] = true
				prev[e.Holder] = e
				queue = append(queue, e.Holder)
			}
		}
	}
	return nil
}
