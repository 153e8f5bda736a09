package gen

import (
	"fmt"
	"sort"

	"github.com/dave/jennifer/jen"

	"github.com/lockgen/lockgen/internal/defs"
	"github.com/lockgen/lockgen/internal/gotypes"
	"github.com/lockgen/lockgen/internal/spec"
	"github.com/lockgen/lockgen/runtime/lockimpl"
)

// queueReceiver is the receiver of the methods of Queues.
const queueReceiver = "q"

// queueScriptsVar names the lockimpl.QueueScripts of the generated file.
const queueScriptsVar = "queueScripts"

// queue is a queue as generated.
type queue struct {
	*spec.Queue
	object
	pkg string // the package name of a named payload type, once resolved
}

// runtimeType names the runtime's generic type for the queue.
func (q *queue) runtimeType() string {
	switch {
	case q.Delay && q.Reliable != nil:
		return "DelayedReliableQueue"
	case q.Delay:
		return "DelayedQueue"
	case q.Reliable != nil:
		return "ReliableQueue"
	}
	return "Queue"
}

// payload is the item type as Go code: the payload type, or a pointer to
// it for protobuf messages.
func (q *queue) payload() *jen.Statement {
	switch {
	case q.Codec == "protobuf":
		return jen.Op("*").Qual(q.Payload.ImportPath, q.Payload.TypeName)
	case q.Payload.ImportPath != "":
		return jen.Qual(q.Payload.ImportPath, q.Payload.TypeName)
	case q.Payload.TypeName == "[]byte":
		return jen.Index().Byte()
	}
	return jen.Id(q.Payload.TypeName)
}

// payloadDoc is the item type as a reader of the doc comment knows it.
func (q *queue) payloadDoc() string {
	if q.Payload.ImportPath != "" && q.pkg != "" {
		if q.Codec == "protobuf" {
			return "*" + q.pkg + "." + q.Payload.TypeName
		}
		return q.pkg + "." + q.Payload.TypeName
	}
	return q.Payload.TypeName
}

// queueTypeExpr is *lockrt.<Type>[Payload].
func (q *queue) typeExpr() *jen.Statement {
	return jen.Op("*").Qual(runtimePath, q.runtimeType()).Types(q.payload())
}

// queuesSection generates the queues: section.
type queuesSection struct {
	queues []*queue // sorted by name
}

func init() { registerSection("queues", func() section { return &queuesSection{} }) }

// collect keeps the spec's queues and checks param names.
func (s *queuesSection) collect(g *generator) {
	for _, sq := range g.spec.Queues {
		q := &queue{Queue: sq, object: g.newObject(sq.Object, queueReceiver, "Queue", queueScriptsVar)}
		s.queues = append(s.queues, q)
	}
}

// params returns the params of every queue.
func (s *queuesSection) params() []*param {
	return paramsOf(s.queues)
}

// scripts returns the queue scripts: every queue uses all of them.
func (s *queuesSection) scripts() []string {
	if len(s.queues) == 0 {
		return nil
	}
	return lockimpl.ScriptNames(lockimpl.Scripts().Queues())
}

// queuesOf returns g's queues section.
func (g *generator) queuesOf() *queuesSection {
	for _, sec := range g.sections {
		if s, ok := sec.(*queuesSection); ok {
			return s
		}
	}
	return &queuesSection{}
}

// payloadTypes returns the payload types named by import path, each once.
func (g *generator) payloadTypes() []gotypes.Type {
	var ts []gotypes.Type
	seen := map[gotypes.Type]bool{}
	for _, q := range g.queuesOf().queues {
		if q.Payload.ImportPath == "" {
			continue
		}
		t := gotypes.Type{ImportPath: q.Payload.ImportPath, Name: q.Payload.TypeName}
		if !seen[t] {
			seen[t] = true
			ts = append(ts, t)
		}
	}
	return ts
}

// hasNamedPayloads reports whether a payload type is named by import path.
func (g *generator) hasNamedPayloads() bool { return len(g.payloadTypes()) > 0 }

// resolvedPayloads records what resolving the payload types found, and
// reports those that cannot be used at the payload's position.
func (g *generator) resolvedPayloads(results map[gotypes.Type]gotypes.Result) {
	for _, q := range g.queuesOf().queues {
		if q.Payload.ImportPath == "" {
			continue
		}
		r := results[gotypes.Type{ImportPath: q.Payload.ImportPath, Name: q.Payload.TypeName}]
		if r.Err != nil {
			g.errorAt(q.PayloadPos, r.Hint, "queue %s: payload %v", q.Name, r.Err)
			continue
		}
		if q.Codec == "protobuf" && !r.ProtoMessage {
			g.errorAt(q.CodecPos, "codec protobuf takes a message type protoc-gen-go generated, or choose codec: json",
				"queue %s: codec protobuf: *%s does not implement proto.Message (it has no ProtoReflect method)", q.Name, q.Payload)
			continue
		}
		q.pkg = r.Package
	}
}

// render writes the Queues type, its constructor, a field or method per
// queue, and the definitions they use.
func (s *queuesSection) render(g *generator, f *jen.File) {
	if len(s.queues) == 0 {
		return
	}
	// Name the payloads' packages as they declare themselves.
	pkgs := map[string]string{}
	for _, q := range s.queues {
		if q.Payload.ImportPath != "" {
			pkgs[q.Payload.ImportPath] = q.pkg
		}
	}
	paths := make([]string, 0, len(pkgs))
	for p := range pkgs {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		f.ImportName(p, pkgs[p])
	}

	src := g.sourceName()
	client := jen.Op("*").Qual(runtimePath, "Client")
	// The client is kept only for the methods of keyed queues; a queue
	// without params is made once, by NewQueues, and kept in a field.
	var fields, values []jen.Code
	for _, q := range s.queues {
		if len(q.params) > 0 {
			fields = append(fields, jen.Id("c").Add(client))
			values = append(values, field("c", jen.Id("c")))
			break
		}
	}
	for _, q := range s.queues {
		if len(q.params) > 0 {
			continue
		}
		fields = append(fields, jen.Id(q.fieldName()).Add(q.typeExpr()))
		values = append(values, field(q.fieldName(), q.newCall(jen.Id("c"))))
	}
	f.Add(comment("Queues gives typed access to the queues declared in " + src + ",\n" +
		"one method per queue, with the queue's key params."))
	f.Type().Id("Queues").Struct(fields...)
	f.Add(comment("NewQueues returns the queues of " + src + " over c."))
	f.Func().Id("NewQueues").Params(jen.Id("c").Add(client)).Op("*").Id("Queues").Block(
		jen.Return(jen.Op("&").Id("Queues").Custom(multiline, values...)),
	)
	for _, q := range s.queues {
		g.renderQueue(f, q)
	}
	s.renderProtoCodec(f)

	f.Add(comment(queueScriptsVar + " are the runtime's scripts of queues."))
	f.Var().Id(queueScriptsVar).Op("=").Id(pinnedVar).Dot("Queues").Call()
}

// fieldName is the field of Queues holding a queue without params: its
// identifier, unless that is c, the client's field.
func (q *queue) fieldName() string {
	if q.ident == "c" {
		return "cQueue"
	}
	return q.ident
}

// newCall is lockimpl.New<Type>(c, &def, lockrt.JSON[T]{}, key.Key(...)).
func (q *queue) newCall(c jen.Code) *jen.Statement {
	return jen.Qual(implPath, "New"+q.runtimeType()).Call(
		c,
		jen.Op("&").Id(q.defVar()),
		q.codec(),
		keyCall(q.keyVar(), q.params),
	)
}

// codec is the queue's codec value, as the spec names it.
func (q *queue) codec() *jen.Statement {
	switch {
	case q.CustomCodec != nil:
		return jen.Qual(q.CustomCodec.ImportPath, q.CustomCodec.TypeName).Values()
	case q.Codec == "bytes":
		return jen.Qual(runtimePath, "Bytes").Values()
	case q.Codec == "string":
		return jen.Qual(runtimePath, "String").Values()
	case q.Codec == "protobuf":
		t := jen.Qual(q.Payload.ImportPath, q.Payload.TypeName)
		return jen.Id(protoCodecType).Types(t, jen.Op("*").Add(t)).Values()
	}
	return jen.Qual(runtimePath, "JSON").Types(q.payload()).Values()
}

// protoCodecType names the protobuf codec a generated file declares when
// one of its queues uses it (the runtime does not depend on protobuf).
const protoCodecType = "protoCodec"

const protoPath = "google.golang.org/protobuf/proto"

// renderProtoCodec declares protoCodec when a queue uses it.
func (s *queuesSection) renderProtoCodec(f *jen.File) {
	used := false
	for _, q := range s.queues {
		used = used || q.Codec == "protobuf"
	}
	if !used {
		return
	}
	f.Add(comment(protoCodecType + " is the protobuf codec of the queues that name it: proto.Marshal and\nproto.Unmarshal of a message and a pointer to it."))
	f.Type().Id(protoCodecType).Types(jen.Id("T").Any(), jen.Id("P").Interface(jen.Op("*").Id("T"), jen.Qual(protoPath, "Message"))).Struct()
	recv := jen.Id(protoCodecType).Types(jen.Id("T"), jen.Id("P"))
	f.Add(comment("Encode returns v in the protobuf wire format."))
	f.Func().Params(recv.Clone()).Id("Encode").Params(jen.Id("v").Id("P")).Params(jen.Index().Byte(), jen.Error()).Block(
		jen.Return(jen.Qual(protoPath, "Marshal").Call(jen.Id("v"))),
	)
	f.Add(comment("Decode parses data into a new message."))
	f.Func().Params(recv.Clone()).Id("Decode").Params(jen.Id("data").Index().Byte()).Params(jen.Id("P"), jen.Error()).Block(
		jen.Id("v").Op(":=").Id("P").Call(jen.New(jen.Id("T"))),
		jen.Return(jen.Id("v"), jen.Qual(protoPath, "Unmarshal").Call(jen.Id("data"), jen.Id("v"))),
	)
	f.Add(comment("CodecTag returns 'p', the protobuf codec's tag in an item's envelope."))
	f.Func().Params(recv.Clone()).Id("CodecTag").Params().Byte().Block(jen.Return(jen.Id("'p'")))
}

// queueDoc is the doc comment of a queue's method.
func (g *generator) queueDoc(q *queue) string {
	kind := "Queue"
	switch {
	case q.Delay && q.Reliable != nil:
		kind = "Delayed reliable queue"
	case q.Delay:
		kind = "Delayed queue"
	case q.Reliable != nil:
		kind = "Reliable queue"
	}
	var names []string
	for _, p := range q.params {
		names = append(names, p.Name)
	}
	fallback := q.Name + " returns the " + q.Name + " queue."
	if len(names) > 0 {
		fallback = q.Name + " returns the " + q.Name + " queue for the given " + list(names) + "."
	}
	doc := docComment(q.Name, q.Description, fallback)
	facts := kind + " of " + q.payloadDoc() + " on key " + keyDoc(g.spec.Namespace, q.Object)
	if q.Reliable != nil {
		facts += fmt.Sprintf(",\nvisibility %s, at most %d deliveries", humanDuration(q.Reliable.Visibility), q.Reliable.MaxDeliveries)
		if q.Retention != nil {
			facts += fmt.Sprintf(",\ncompleted items kept %s (at most %d)", humanDuration(q.Retention.For), q.Retention.Max)
		}
		if q.Unique > 0 {
			facts += fmt.Sprintf(", unique keys kept %s", humanDuration(q.Unique))
		}
	}
	return doc + "\n\n" + facts + "."
}

// renderQueue writes a keyed queue's method and every queue's definitions.
func (g *generator) renderQueue(f *jen.File, q *queue) {
	f.Add(comment(g.queueDoc(q)))
	body := q.newCall(jen.Id(queueReceiver).Dot("c"))
	if len(q.params) == 0 {
		body = jen.Id(queueReceiver).Dot(q.fieldName())
	}
	f.Func().Params(jen.Id(queueReceiver).Op("*").Id("Queues")).Id(q.Name).Params(signature(q.params)...).
		Add(q.typeExpr()).Block(jen.Return(body))
	f.Var().Defs(
		jen.Id(q.keyVar()).Op("=").Add(keyDef(g.spec.Namespace, q.Object)),
		jen.Id(q.defVar()).Op("=").Add(literal(defs.Queue(q.Queue), jen.Id(queueScriptsVar))),
	)
}
