// Command gateway-conformance extracts, from the Gateway API conformance suite's own sources,
// the test data cftunnel's offline conformance tests read: for each conformance test, its
// short name, its manifests, the requests it makes with the backend (or status code) it
// expects, the conditions it asserts and the assertion helpers it calls, in source order.
//
//	go run . <conformance module dir> <gateway-api module dir> <output dir> ShortName...
//
// It writes <output dir>/cases.json and copies each test's manifests and base/manifests.yaml
// under <output dir>/manifests/. Only the Go standard library is used: the suite's sources are
// parsed, never built or run.
package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

type request struct {
	Host      string `json:"host,omitempty"`
	Path      string `json:"path,omitempty"`
	Method    string `json:"method,omitempty"`
	Headers   bool   `json:"headers,omitempty"`
	Backend   string `json:"backend,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Status    int    `json:"status,omitempty"`
	// Gateway is the namespace/name of the Gateway whose address the request is sent to: the
	// one the test last resolved (NewGatewayRef) before declaring the request.
	Gateway string `json:"gateway,omitempty"`
	// Deleted lists the objects (`Kind namespace/name`) the test deleted before the request.
	Deleted []string `json:"deleted,omitempty"`
}

type condition struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// expectedStatus is a ListenerStatus or RouteParentStatus a test expects: its listener name
// and attachedRoutes (listeners only) and conditions (a condition without reason: any reason).
type expectedStatus struct {
	Name           string      `json:"name,omitempty"`
	AttachedRoutes *int        `json:"attachedRoutes,omitempty"`
	Conditions     []condition `json:"conditions"`
}

type call struct {
	Helper string   `json:"helper"`
	Args   []string `json:"args"`
}

type testCase struct {
	ShortName  string      `json:"shortName"`
	Manifests  []string    `json:"manifests"`
	Requests   []request   `json:"requests"`
	Conditions []condition `json:"conditions"`
	// Listeners and Parents are the statuses given to GatewayStatusMustHaveListeners and
	// HTTPRouteMustHaveParents (see Calls for the object each was asserted on).
	Listeners []expectedStatus `json:"listeners"`
	Parents   []expectedStatus `json:"parents"`
	Calls     []call           `json:"calls"`
}

// constants maps "pkg.Name" (and bare names of the file's own package) to string values.
type constants map[string]string

func parseConsts(dir, alias string, into constants) error {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		return err
	}
	for _, pkg := range pkgs {
		for _, file := range pkg.Files {
			for _, decl := range file.Decls {
				gen, ok := decl.(*ast.GenDecl)
				if !ok || gen.Tok != token.CONST {
					continue
				}
				for _, spec := range gen.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								if v, err := strconv.Unquote(lit.Value); err == nil {
									into[alias+"."+name.Name] = v
								}
							}
						}
					}
				}
			}
		}
	}
	return nil
}

type resolver struct {
	consts constants
	locals map[string]ast.Expr
}

func (r *resolver) text(e ast.Expr) string {
	switch v := e.(type) {
	case *ast.BasicLit:
		if s, err := strconv.Unquote(v.Value); err == nil {
			return s
		}
		return v.Value
	case *ast.SelectorExpr:
		if x, ok := v.X.(*ast.Ident); ok {
			if s, ok := r.consts[x.Name+"."+v.Sel.Name]; ok {
				return s
			}
			return x.Name + "." + v.Sel.Name
		}
	case *ast.CallExpr:
		if f, ok := v.Fun.(*ast.Ident); ok && f.Name == "string" && len(v.Args) == 1 {
			return r.text(v.Args[0])
		}
		if sel, ok := v.Fun.(*ast.SelectorExpr); ok {
			// A conversion to one of the API's named string types: v1.Namespace(x) is x.
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "v1" && len(v.Args) == 1 {
				return r.text(v.Args[0])
			}
			args := []string{}
			for _, arg := range v.Args {
				args = append(args, r.text(arg))
			}
			return sel.Sel.Name + "(" + strings.Join(args, ", ") + ")"
		}
	case *ast.Ident:
		if local, ok := r.locals[v.Name]; ok {
			return r.text(local)
		}
		return v.Name
	case *ast.CompositeLit:
		// types.NamespacedName{Name: ..., Namespace: ...} → namespace/name
		fields := r.fields(v)
		if name, ok := fields["Name"]; ok {
			return r.text(fields["Namespace"]) + "/" + r.text(name)
		}
	}
	return fmt.Sprintf("<%T>", e)
}

func (r *resolver) fields(lit *ast.CompositeLit) map[string]ast.Expr {
	out := map[string]ast.Expr{}
	for _, elt := range lit.Elts {
		if kv, ok := elt.(*ast.KeyValueExpr); ok {
			if key, ok := kv.Key.(*ast.Ident); ok {
				out[key.Name] = kv.Value
			}
		}
	}
	return out
}

func typeName(e ast.Expr) string {
	switch v := e.(type) {
	case *ast.SelectorExpr:
		if x, ok := v.X.(*ast.Ident); ok {
			return x.Name + "." + v.Sel.Name
		}
	case *ast.ArrayType:
		return "[]" + typeName(v.Elt)
	}
	return ""
}

func (r *resolver) request(lit *ast.CompositeLit) request {
	var out request
	f := r.fields(lit)
	if req, ok := f["Request"].(*ast.CompositeLit); ok {
		rf := r.fields(req)
		if v, ok := rf["Host"]; ok {
			out.Host = r.text(v)
		}
		if v, ok := rf["Path"]; ok {
			out.Path = r.text(v)
		}
		if v, ok := rf["Method"]; ok {
			out.Method = r.text(v)
		}
		_, out.Headers = rf["Headers"]
	}
	if v, ok := f["Backend"]; ok {
		out.Backend = r.text(v)
	}
	if v, ok := f["Namespace"]; ok {
		out.Namespace = r.text(v)
	}
	if resp, ok := f["Response"].(*ast.CompositeLit); ok {
		if v, ok := r.fields(resp)["StatusCode"]; ok {
			out.Status, _ = strconv.Atoi(r.text(v))
		}
	}
	return out
}

func (r *resolver) condition(lit *ast.CompositeLit) condition {
	f := r.fields(lit)
	c := condition{Type: r.text(f["Type"]), Status: r.text(f["Status"])}
	if reason, ok := f["Reason"]; ok {
		c.Reason = r.text(reason)
	}
	return c
}

func (r *resolver) status(lit *ast.CompositeLit) expectedStatus {
	f := r.fields(lit)
	out := expectedStatus{Conditions: []condition{}}
	if name, ok := f["Name"]; ok {
		out.Name = r.text(name)
	}
	if n, ok := f["AttachedRoutes"]; ok {
		if count, err := strconv.Atoi(r.text(n)); err == nil {
			out.AttachedRoutes = &count
		}
	}
	if conds, ok := f["Conditions"].(*ast.CompositeLit); ok {
		for _, e := range conds.Elts {
			if c, ok := e.(*ast.CompositeLit); ok {
				out.Conditions = append(out.Conditions, r.condition(c))
			}
		}
	}
	return out
}

func extract(path string, consts constants) (*testCase, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		return nil, err
	}
	r := &resolver{consts: consts, locals: map[string]ast.Expr{}}
	tc := &testCase{
		Requests: []request{}, Conditions: []condition{}, Calls: []call{},
		Listeners: []expectedStatus{}, Parents: []expectedStatus{},
	}
	gateway := ""
	var deleted []string
	// Loop variables ranging over a literal list, with the end of their loop: a helper called
	// with one inside the loop is recorded once per element.
	type loop struct {
		elements []ast.Expr
		end      token.Pos
	}
	loops := map[string]loop{}
	ast.Inspect(file, func(n ast.Node) bool {
		switch v := n.(type) {
		case *ast.AssignStmt:
			if len(v.Lhs) == len(v.Rhs) {
				for i, lhs := range v.Lhs {
					if id, ok := lhs.(*ast.Ident); ok {
						r.locals[id.Name] = v.Rhs[i]
					}
				}
			}
		case *ast.RangeStmt:
			if value, ok := v.Value.(*ast.Ident); ok {
				if over, ok := v.X.(*ast.Ident); ok {
					if lit, ok := r.locals[over.Name].(*ast.CompositeLit); ok {
						loops[value.Name] = loop{elements: lit.Elts, end: v.End()}
					}
				}
			}
		case *ast.CallExpr:
			if sel, ok := v.Fun.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "kubernetes" {
					// One call per element of a loop variable among the arguments.
					variants := [][]ast.Expr{v.Args}
					for i, arg := range v.Args {
						id, ok := arg.(*ast.Ident)
						if !ok {
							continue
						}
						if l, ok := loops[id.Name]; ok && v.Pos() < l.end {
							variants = nil
							for _, e := range l.elements {
								args := append([]ast.Expr{}, v.Args...)
								args[i] = e
								variants = append(variants, args)
							}
							break
						}
					}
					for _, args := range variants {
						c := call{Helper: sel.Sel.Name, Args: []string{}}
						for _, arg := range args {
							c.Args = append(c.Args, r.text(arg))
						}
						tc.Calls = append(tc.Calls, c)
						if c.Helper == "NewGatewayRef" && len(c.Args) > 0 {
							gateway = c.Args[0]
						}
					}
				}
				// suite.Client.Delete(ctx, &object): later requests run without it.
				if sel.Sel.Name == "Delete" && len(v.Args) == 2 {
					if ref, ok := v.Args[1].(*ast.UnaryExpr); ok && ref.Op == token.AND {
						if id, ok := ref.X.(*ast.Ident); ok {
							if lit, ok := r.locals[id.Name].(*ast.CompositeLit); ok {
								kind := strings.TrimPrefix(typeName(lit.Type), "v1.")
								if meta, ok := r.fields(lit)["ObjectMeta"].(*ast.CompositeLit); ok {
									deleted = append(deleted, kind+" "+r.text(meta))
								}
							}
						}
					}
				}
			}
		case *ast.CompositeLit:
			switch typeName(v.Type) {
			case "confsuite.ConformanceTest", "suite.ConformanceTest":
				f := r.fields(v)
				tc.ShortName = r.text(f["ShortName"])
				if m, ok := f["Manifests"].(*ast.CompositeLit); ok {
					for _, e := range m.Elts {
						tc.Manifests = append(tc.Manifests, r.text(e))
					}
				}
			case "http.ExpectedResponse":
				req := r.request(v)
				req.Gateway = gateway
				req.Deleted = append([]string(nil), deleted...)
				tc.Requests = append(tc.Requests, req)
				return false
			case "[]http.ExpectedResponse":
				for _, e := range v.Elts {
					if lit, ok := e.(*ast.CompositeLit); ok {
						req := r.request(lit)
						req.Gateway = gateway
						req.Deleted = append([]string(nil), deleted...)
						tc.Requests = append(tc.Requests, req)
					}
				}
				return false
			case "metav1.Condition":
				tc.Conditions = append(tc.Conditions, r.condition(v))
			case "[]v1.ListenerStatus":
				for _, e := range v.Elts {
					if lit, ok := e.(*ast.CompositeLit); ok {
						tc.Listeners = append(tc.Listeners, r.status(lit))
					}
				}
				return false
			case "[]v1.RouteParentStatus":
				for _, e := range v.Elts {
					if lit, ok := e.(*ast.CompositeLit); ok {
						tc.Parents = append(tc.Parents, r.status(lit))
					}
				}
				return false
			}
		}
		return true
	})
	return tc, nil
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}

func main() {
	if len(os.Args) < 5 {
		fmt.Fprintln(os.Stderr, "usage: gateway-conformance <conformance dir> <gateway-api dir> <out dir> ShortName...")
		os.Exit(2)
	}
	conformance, gatewayAPI, out := os.Args[1], os.Args[2], os.Args[3]
	wanted := map[string]bool{}
	for _, name := range os.Args[4:] {
		wanted[name] = true
	}
	consts := constants{
		"metav1.ConditionTrue":    "True",
		"metav1.ConditionFalse":   "False",
		"metav1.ConditionUnknown": "Unknown",
	}
	for alias, dir := range map[string]string{
		"confsuite": filepath.Join(conformance, "utils", "suite"),
		"suite":     filepath.Join(conformance, "utils", "suite"),
		"v1":        filepath.Join(gatewayAPI, "apis", "v1"),
	} {
		if err := parseConsts(dir, alias, consts); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	sources, _ := filepath.Glob(filepath.Join(conformance, "tests", "*.go"))
	sort.Strings(sources)
	var cases []*testCase
	for _, source := range sources {
		tc, err := extract(source, consts)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if !wanted[tc.ShortName] {
			continue
		}
		delete(wanted, tc.ShortName)
		for _, manifest := range tc.Manifests {
			if err := copyFile(filepath.Join(conformance, manifest), filepath.Join(out, "manifests", manifest)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		cases = append(cases, tc)
	}
	if len(wanted) > 0 {
		fmt.Fprintln(os.Stderr, "no conformance test named", wanted)
		os.Exit(1)
	}
	if err := copyFile(filepath.Join(conformance, "base", "manifests.yaml"), filepath.Join(out, "manifests", "base", "manifests.yaml")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	data, err := json.MarshalIndent(cases, "", "  ")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(filepath.Join(out, "cases.json"), append(data, '\n'), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
