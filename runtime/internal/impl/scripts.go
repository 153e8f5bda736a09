package impl

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"

	"github.com/lockgen/lockgen/templates"
)

// The runtime owns its Lua: the scripts are lockgen's templates, embedded
// in this binary, expanded and hashed once. Generated code holds the
// user's schema and, per kind it uses, the SHA1 of each script it was
// generated against (its pins, Pin); a runtime whose scripts differ
// refuses the objects' calls with ErrScriptMismatch, naming the
// regenerate command, instead of running scripts the generated
// definitions were not made for.

// ErrScriptMismatch: a script is not what the caller expects: Redis
// computed another SHA1 for it, or the generated code was generated
// against other scripts than this runtime's (regenerate it). Package
// runtime exports it.
var ErrScriptMismatch = errors.New("lockgen: script SHA1 mismatch")

// ErrLockLost and ErrClosed are package runtime's (see there): defined here
// so that the runtime's internal packages end holds with them.
var (
	ErrLockLost = errors.New("lockgen: lock lost")
	ErrClosed   = errors.New("lockgen: client closed")
)

// own returns the runtime's scripts by name.
var own = sync.OnceValue(func() map[string]*Script {
	m := map[string]*Script{}
	for _, name := range templates.Names() {
		src, err := templates.Source(name)
		if err != nil {
			// The templates are embedded in this binary; a broken one is
			// a build defect, which the templates' tests catch.
			panic(err)
		}
		sum := sha1.Sum([]byte(src))
		m[name] = &Script{Name: name, Source: src, SHA1: hex.EncodeToString(sum[:])}
	}
	return m
})

// Pins maps a script's name to the SHA1 generated code expects of it.
type Pins map[string]string

// Pinned is a set of the runtime's scripts, checked against the pins of
// one generated file.
type Pinned struct {
	scripts map[string]*Script
	err     error // the first mismatch, or nil
}

// Pin checks pins against the runtime's scripts. When they all match, the
// sets it returns hold the runtime's scripts; otherwise every script of
// them carries the mismatch (Script.Err), which every call that would run
// one returns.
func Pin(pins Pins) *Pinned {
	p := &Pinned{scripts: map[string]*Script{}}
	scripts := own()
	names := make([]string, 0, len(pins))
	for name := range pins {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s, ok := scripts[name]
		switch {
		case !ok:
			p.err = fmt.Errorf("%w: the generated code pins script %s, which this lockgen runtime does not have: %s", ErrScriptMismatch, name, regenerate)
		case s.SHA1 != pins[name]:
			p.err = fmt.Errorf("%w: the generated code was made for script %s %s, this lockgen runtime has %s: %s", ErrScriptMismatch, name, short(pins[name]), short(s.SHA1), regenerate)
		}
		if p.err != nil {
			break
		}
	}
	for _, name := range names {
		s := scripts[name]
		if p.err != nil {
			s = &Script{Name: name, Err: p.err}
			if o, ok := scripts[name]; ok {
				s.Source, s.SHA1 = o.Source, o.SHA1
			}
		}
		p.scripts[name] = s
	}
	return p
}

// regenerate says what to do about a mismatch.
const regenerate = "regenerate it (go generate ./..., with the lockgen version of your go.mod)"

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// Own returns the runtime's scripts, unpinned: for the runtime's own
// definitions (inspect's, tests').
var Own = sync.OnceValue(func() *Pinned {
	p := &Pinned{scripts: own()}
	return p
})

// Err returns the mismatch of the pins, or nil.
func (p *Pinned) Err() error { return p.err }

// All returns the pinned scripts, by name.
func (p *Pinned) All() []*Script {
	names := make([]string, 0, len(p.scripts))
	for name := range p.scripts {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]*Script, len(names))
	for i, name := range names {
		out[i] = p.scripts[name]
	}
	return out
}

// Script returns the named script ("": nil); one that was not pinned
// carries a mismatch (the generator pins every script of the kinds a
// file uses).
func (p *Pinned) Script(name string) *Script { return p.get(name) }

func (p *Pinned) get(name string) *Script {
	if name == "" {
		return nil
	}
	if s, ok := p.scripts[name]; ok {
		return s
	}
	err := p.err
	if err == nil {
		err = fmt.Errorf("%w: the generated code does not pin script %s: %s", ErrScriptMismatch, name, regenerate)
	}
	s := &Script{Name: name, Err: err}
	if o, ok := own()[name]; ok {
		s.Source, s.SHA1 = o.Source, o.SHA1
	}
	return s
}

// Names returns the names of the scripts of set, a kind's scripts (a
// *LockScripts, *SemaphoreScripts, …: its *Script fields), each once, in
// field order: what generated code pins for the kind. It panics when set
// is not a pointer to a struct.
func Names(set any) []string {
	v := reflect.ValueOf(set).Elem()
	seen := map[string]bool{}
	var names []string
	for i := range v.NumField() {
		s, ok := v.Field(i).Interface().(*Script)
		if ok && s != nil && !seen[s.Name] {
			seen[s.Name] = true
			names = append(names, s.Name)
		}
	}
	return names
}

// RegistryRefresh is the runtime's registry_refresh script, which every
// kind with a waiter registry shares: the runtime's own, not part of a
// kind's set, so generated code does not pin it (nothing generated
// depends on its contract).
func RegistryRefresh() *Script { return own()["registry_refresh"] }
