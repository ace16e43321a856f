// What Go's regexp answers, for test/runtime/go/regexp.test.ts: reads
// [{"p": pattern, "in": [inputs]}] on stdin and writes, per pattern, the
// error of regexp.Compile or NumSubexp and, per input, the submatches of
// ^(?:p)$ (whole) and of p (find): null where there is no match and for a
// group that took no part. The whole match wraps p as Go prints its parse,
// so that \Q… cannot swallow the wrapping. Run by generate.ts.
package main

import (
	"encoding/json"
	"os"
	"regexp"
	"regexp/syntax"
)

type result struct {
	P      string      `json:"p"`
	Err    string      `json:"err,omitempty"`
	Groups int         `json:"groups"`
	Whole  [][]*string `json:"whole,omitempty"`
	Find   [][]*string `json:"find,omitempty"`
	In     []string    `json:"in,omitempty"`
}

func sub(re *regexp.Regexp, s string) []*string {
	m := re.FindStringSubmatchIndex(s)
	if m == nil {
		return nil
	}
	out := make([]*string, len(m)/2)
	for i := range out {
		if m[2*i] >= 0 {
			v := s[m[2*i]:m[2*i+1]]
			out[i] = &v
		}
	}
	return out
}

func main() {
	var cases []struct {
		P  string   `json:"p"`
		In []string `json:"in"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		panic(err)
	}
	out := []result{}
	for _, c := range cases {
		re, err := regexp.Compile(c.P)
		if err != nil {
			out = append(out, result{P: c.P, Err: err.Error()})
			continue
		}
		tree, err := syntax.Parse(c.P, syntax.Perl)
		if err != nil {
			panic(err)
		}
		whole := regexp.MustCompile("^(?:" + tree.String() + ")$")
		r := result{P: c.P, Groups: re.NumSubexp(), In: c.In, Whole: [][]*string{}, Find: [][]*string{}}
		for _, s := range c.In {
			r.Whole = append(r.Whole, sub(whole, s))
			r.Find = append(r.Find, sub(re, s))
		}
		out = append(out, r)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		panic(err)
	}
}
