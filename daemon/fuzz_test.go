package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/bits"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ublk-raid/ublk-raid/engine"
)

// FuzzDecodeAddRequest feeds request bodies to decodeBody, what the
// handlers decode bodies with, and what it accepts as an AddRequest to
// Spec. Seeds: testdata/fuzz/FuzzDecodeAddRequest.
//
// Invariants: nothing panics; every error is one line; an accepted body
// is one UTF-8 JSON object whose re-encoding is accepted as the same
// request; MemberRequest.check accepts only absolute paths of text, with
// one-line errors; Spec's errors are FieldErrors on fields of AddRequest; what
// Spec accepts is within the documented ranges.
func FuzzDecodeAddRequest(f *testing.F) {
	fields := map[string]bool{}
	rt := reflect.TypeOf(AddRequest{})
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		fields[name] = true
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var mr MemberRequest
		if err := decodeBody(body, &mr); err != nil {
			oneLine(t, err)
		} else {
			accepted(t, body)
			for _, op := range []string{"fail", "remove", "re-add", "add-spare", "replace"} {
				if fe := mr.check(op); fe != nil {
					oneLine(t, fe)
					continue
				}
				for _, p := range append([]string{mr.With}, mr.Members...) {
					if p != "" && (!filepath.IsAbs(p) || checkText(p) != nil) {
						t.Fatalf("%s: check accepted path %q", op, p)
					}
				}
			}
		}
		var req AddRequest
		err := decodeBody(body, &req)
		if err != nil {
			oneLine(t, err)
			return
		}
		accepted(t, body)
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", req, err)
		}
		var again AddRequest
		if err := decodeBody(b, &again); err != nil {
			t.Fatalf("re-encoded request %s refused: %v", b, err)
		}
		if b2, _ := json.Marshal(again); !bytes.Equal(b, b2) {
			t.Fatalf("request changed on a round trip: %s then %s", b, b2)
		}
		s, err := req.Spec()
		if err != nil {
			oneLine(t, err)
			var fe *FieldError
			if !errors.As(err, &fe) || !fields[fe.Field] || (fe.Other != "" && !fields[fe.Other]) {
				t.Fatalf("Spec error %#v is not a FieldError on a field of AddRequest", err)
			}
			return
		}
		if len(req.Members) == 0 || len(req.Name) > engine.ArrayNameMax || checkText(req.Name) != nil {
			t.Fatalf("Spec accepted %+v", req)
		}
		if c := s.ChunkSectors; bits.OnesCount64(c) != 1 || c < 8 || c > 128<<10 {
			t.Fatalf("Spec accepted chunk %d sectors from %+v", c, req)
		}
		if r := s.RegionSectors; r != 0 && (bits.OnesCount64(r) != 1 || r < 128) {
			t.Fatalf("Spec accepted region %d sectors from %+v", r, req)
		}
		for i, p := range append(append([]string{}, req.Members...), req.Spares...) {
			if p == "" || checkText(p) != nil || !filepath.IsAbs(p) {
				t.Fatalf("Spec accepted path %q", p)
			}
			for _, q := range append(append([]string{}, req.Members...), req.Spares...)[:i] {
				if p == q {
					t.Fatalf("Spec accepted %q twice", p)
				}
			}
		}
	})
}

func oneLine(t *testing.T, err error) {
	t.Helper()
	if strings.ContainsAny(err.Error(), "\n\r") {
		t.Fatalf("error is not one line: %q", err)
	}
}

// accepted checks what decodeBody accepts: one JSON object, UTF-8.
func accepted(t *testing.T, body []byte) {
	t.Helper()
	trimmed := bytes.Trim(body, jsonSpace)
	if !utf8.Valid(body) || !json.Valid(body) || len(trimmed) == 0 || trimmed[0] != '{' {
		t.Fatalf("decodeBody accepted %q", body)
	}
}
