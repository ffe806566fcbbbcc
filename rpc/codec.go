package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// A proto3 string must be valid UTF-8, and gRPC answers a request that
// breaks the rule Internal ("grpc: failed to unmarshal"), whatever the codec
// returns: users and alerts read that as a server fault. The API keeps its
// string fields (the JSON gateway relies on them), so the codec below
// decodes such a request into an empty message that carries only the path
// of the offending field, in an unknown field no client sets, and the
// interceptors refuse it as InvalidArgument (INVALID_FIELD) naming that
// field, before any handler or the authenticator sees it.

// badTextField is the field number of the mark: the largest valid one.
const badTextField = protowire.MaxValidNumber

// textCodec is gRPC's proto codec but for requests with invalid UTF-8.
type textCodec struct{ encoding.CodecV2 }

// Unmarshal decodes data into v; on invalid UTF-8 it leaves v empty but
// for the mark and returns nil.
func (c textCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.CodecV2.Unmarshal(data, v)
	var utf8Err interface{ InvalidUTF8() bool }
	m, ok := v.(proto.Message)
	if err == nil || !ok || !errors.As(err, &utf8Err) || !utf8Err.InvalidUTF8() {
		return err
	}
	path := invalidUTF8Field(m.ProtoReflect().Descriptor(), data.Materialize())
	if path == "" {
		path = "request"
	}
	proto.Reset(m)
	mark := protowire.AppendTag(nil, badTextField, protowire.BytesType)
	m.ProtoReflect().SetUnknown(protowire.AppendBytes(mark, []byte(path)))
	return nil
}

// invalidUTF8Field returns the path of the first string field in b, an
// encoded message of md, that is not valid UTF-8, such as "id.tenant" or
// "response.headers[1].value"; "" when it finds none.
func invalidUTF8Field(md protoreflect.MessageDescriptor, b []byte) string {
	seen := map[protowire.Number]int{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		fd := md.Fields().ByNumber(num)
		if fd == nil || typ != protowire.BytesType ||
			fd.Kind() != protoreflect.StringKind && fd.Kind() != protoreflect.MessageKind {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return ""
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		name := string(fd.Name())
		if fd.IsList() {
			name = fmt.Sprintf("%s[%d]", name, seen[num])
			seen[num]++
		}
		if fd.Kind() == protoreflect.StringKind && !utf8.Valid(v) {
			return name
		}
		if fd.Kind() == protoreflect.MessageKind {
			if sub := invalidUTF8Field(fd.Message(), v); sub != "" {
				return name + "." + sub
			}
		}
	}
	return ""
}

// badText returns the refusal of a request textCodec marked, or nil.
func badText(req any) error {
	m, ok := req.(proto.Message)
	if !ok {
		return nil
	}
	unknown := m.ProtoReflect().GetUnknown()
	if len(unknown) == 0 {
		return nil
	}
	num, typ, n := protowire.ConsumeTag(unknown)
	if n < 0 || num != badTextField || typ != protowire.BytesType {
		return nil
	}
	path, _ := protowire.ConsumeBytes(unknown[n:])
	if !utf8.Valid(path) {
		path = []byte("request")
	}
	return toStatus(invalid(string(path), "valid UTF-8", "not valid UTF-8"), slog.Default())
}

// textServerOptions install textCodec and the interceptors that refuse
// what it marked; they go first in the chain.
func textServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(textCodec{encoding.GetCodecV2("proto")}),
		grpc.ChainUnaryInterceptor(textUnaryInterceptor),
		grpc.ChainStreamInterceptor(textStreamInterceptor),
	}
}

func textUnaryInterceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := badText(req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func textStreamInterceptor(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, textCheckedStream{ss})
}

// textCheckedStream refuses every received message textCodec marked.
type textCheckedStream struct{ grpc.ServerStream }

func (s textCheckedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return badText(m)
}
