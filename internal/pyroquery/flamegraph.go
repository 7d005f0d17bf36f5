package pyroquery

import "fmt"

// FlameGraph is the server's flame graph: names, and the nodes level by
// level, four numbers a node: its offset from the previous node's end on
// that level, its total, its self and its name's index.
type FlameGraph struct {
	Names  []string `json:"names"`
	Levels []struct {
		Values int64s `json:"values"`
	} `json:"levels"`
	Total int64js `json:"total"`
}

// Node is a frame of the flame graph's tree.
type Node struct {
	Name        string
	Total, Self int64
	Children    []*Node
}

// Tree rebuilds the flame graph's tree: a node's parent is the node on
// the level above whose span holds its start. The root is "total".
func (f *FlameGraph) Tree() (*Node, error) {
	type placed struct {
		n     *Node
		start int64
	}
	var above []placed
	var root *Node
	for lvl, level := range f.Levels {
		v := level.Values
		if len(v)%4 != 0 {
			return nil, fmt.Errorf("flame graph level %d: %d values, not fours", lvl, len(v))
		}
		var here []placed
		var x int64
		p := 0 // the parent candidate on the level above
		for i := 0; i < len(v); i += 4 {
			start := x + v[i]
			if v[i+3] < 0 || int(v[i+3]) >= len(f.Names) {
				return nil, fmt.Errorf("flame graph level %d: name index %d of %d", lvl, v[i+3], len(f.Names))
			}
			n := &Node{Name: f.Names[v[i+3]], Total: v[i+1], Self: v[i+2]}
			x = start + n.Total
			here = append(here, placed{n, start})
			if lvl == 0 {
				root = n
				continue
			}
			for p < len(above) && start >= above[p].start+above[p].n.Total {
				p++
			}
			if p == len(above) || start < above[p].start {
				return nil, fmt.Errorf("flame graph level %d: a node at %d under no node above", lvl, start)
			}
			above[p].n.Children = append(above[p].n.Children, n)
		}
		above = here
	}
	if root == nil {
		return &Node{Name: "total"}, nil
	}
	return root, nil
}

// SelfByFunction sums the flame graph's self values by function name.
func (f *FlameGraph) SelfByFunction() (map[string]int64, error) {
	root, err := f.Tree()
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	var walk func(n *Node)
	walk = func(n *Node) {
		if n.Self != 0 {
			m[n.Name] += n.Self
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	for _, c := range root.Children {
		walk(c)
	}
	return m, nil
}

// TotalByFunction is each function's inclusive total: the value of the
// stacks it is on, each stack counted once however often the function
// recurses in it.
func (f *FlameGraph) TotalByFunction() (map[string]int64, error) {
	root, err := f.Tree()
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	on := map[string]int{} // names on the path to the node
	var walk func(n *Node)
	walk = func(n *Node) {
		if on[n.Name] == 0 {
			m[n.Name] += n.Total
		}
		on[n.Name]++
		for _, c := range n.Children {
			walk(c)
		}
		on[n.Name]--
	}
	for _, c := range root.Children {
		walk(c)
	}
	return m, nil
}
