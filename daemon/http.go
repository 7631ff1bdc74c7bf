package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Backend is what the control API operates on. Manager is the real one;
// tests use a fake. Methods are called concurrently from HTTP handlers and
// must be safe for that. Errors choose their HTTP status by wrapping
// ErrNotFound, ErrNotAvailable, Invalid or Refused (anything else: 500).
type Backend interface {
	Add(ctx context.Context, req AddRequest) (Array, error)
	// Delete stops and deletes array n's device and marks the array clean;
	// DeleteAll does so for every array.
	Delete(n int) (DeleteResult, error)
	DeleteAll() (DeleteResult, error)
	List() []Array
	Detail(n int) (Array, error)
	Fail(n int, member string) (Array, error)
	Remove(n int, member string) (Array, error)
	ReAdd(n int, member string) (Array, error)
	// AddSpare adds members as spares of array n: every one is checked
	// before any is added.
	AddSpare(n int, members []string, force bool) (Array, error)
	Replace(n int, member, with string, force bool) (Array, error)
	Check(n int) (Array, error)
	Repair(n int) (Array, error)
	// Grow grows each member's data area of array n to sizeBytes (0: the
	// most every member allows) and the device with it.
	Grow(n int, sizeBytes uint64) (Array, error)
}

// maxBody bounds request bodies (they are a few hundred bytes).
const maxBody = 1 << 20

// NewHandler serves the control API over b:
//
//	GET    /v1/arrays                 list
//	POST   /v1/arrays                 add (AddRequest)
//	DELETE /v1/arrays                 delete all
//	GET    /v1/arrays/{n}             detail
//	DELETE /v1/arrays/{n}             delete
//	POST   /v1/arrays/{n}/fail        (MemberRequest)
//	POST   /v1/arrays/{n}/remove      (MemberRequest)
//	POST   /v1/arrays/{n}/re-add      (MemberRequest)
//	POST   /v1/arrays/{n}/add-spare   (MemberRequest)
//	POST   /v1/arrays/{n}/replace     (MemberRequest)
//	POST   /v1/arrays/{n}/check
//	POST   /v1/arrays/{n}/repair
//	POST   /v1/arrays/{n}/grow        (GrowRequest)
//	GET    /v1/version
func NewHandler(b Backend, version string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(APIVersion+"/arrays", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			writeJSON(w, http.StatusOK, ArrayList{Arrays: nonNil(b.List())})
		case http.MethodPost:
			var req AddRequest
			if !readJSON(w, r, &req) {
				return
			}
			a, err := b.Add(r.Context(), req)
			reply(w, http.StatusCreated, a, err)
		case http.MethodDelete:
			res, err := b.DeleteAll()
			if err != nil && (len(res.Deleted) > 0 || len(res.Forgotten) > 0) {
				// What was deleted is said with the error: the
				// operator must learn which devices are gone.
				writeJSON(w, statusOf(err), DeleteAllError{ErrorBody{singleLine(err.Error())}, res})
				return
			}
			reply(w, http.StatusOK, res, err)
		default:
			methodNotAllowed(w, "GET, POST, DELETE")
		}
	})
	mux.HandleFunc(APIVersion+"/arrays/{n}", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodDelete {
			methodNotAllowed(w, "GET, DELETE")
			return
		}
		n, ok := number(w, r)
		if !ok {
			return
		}
		switch r.Method {
		case http.MethodGet:
			a, err := b.Detail(n)
			reply(w, http.StatusOK, a, err)
		case http.MethodDelete:
			res, err := b.Delete(n)
			reply(w, http.StatusOK, res, err)
		default:
			methodNotAllowed(w, "GET, DELETE")
		}
	})
	memberOp := func(name string, op func(n int, req MemberRequest) (Array, error)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				methodNotAllowed(w, "POST")
				return
			}
			n, ok := number(w, r)
			if !ok {
				return
			}
			var req MemberRequest
			if !readJSON(w, r, &req) {
				return
			}
			if fe := req.check(name); fe != nil {
				writeError(w, http.StatusBadRequest, fe.Error())
				return
			}
			a, err := op(n, req)
			reply(w, http.StatusOK, a, err)
		}
	}
	arrayOp := func(op func(n int) (Array, error)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				methodNotAllowed(w, "POST")
				return
			}
			n, ok := number(w, r)
			if !ok || !noBody(w, r) {
				return
			}
			a, err := op(n)
			reply(w, http.StatusOK, a, err)
		}
	}
	mux.Handle(APIVersion+"/arrays/{n}/fail", memberOp("fail", func(n int, q MemberRequest) (Array, error) { return b.Fail(n, q.Member) }))
	mux.Handle(APIVersion+"/arrays/{n}/remove", memberOp("remove", func(n int, q MemberRequest) (Array, error) { return b.Remove(n, q.Member) }))
	mux.Handle(APIVersion+"/arrays/{n}/re-add", memberOp("re-add", func(n int, q MemberRequest) (Array, error) { return b.ReAdd(n, q.Member) }))
	mux.Handle(APIVersion+"/arrays/{n}/add-spare", memberOp("add-spare", func(n int, q MemberRequest) (Array, error) {
		if len(q.Members) == 0 {
			q.Members = []string{q.Member}
		}
		return b.AddSpare(n, q.Members, q.Force)
	}))
	mux.Handle(APIVersion+"/arrays/{n}/replace", memberOp("replace", func(n int, q MemberRequest) (Array, error) { return b.Replace(n, q.Member, q.With, q.Force) }))
	mux.Handle(APIVersion+"/arrays/{n}/check", arrayOp(b.Check))
	mux.Handle(APIVersion+"/arrays/{n}/repair", arrayOp(b.Repair))
	mux.HandleFunc(APIVersion+"/arrays/{n}/grow", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			methodNotAllowed(w, "POST")
			return
		}
		n, ok := number(w, r)
		if !ok {
			return
		}
		var req GrowRequest
		if !readJSON(w, r, &req) {
			return
		}
		a, err := b.Grow(n, req.SizeBytes)
		reply(w, http.StatusOK, a, err)
	})
	mux.HandleFunc(APIVersion+"/version", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			methodNotAllowed(w, "GET")
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"version": version})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path))
	})
	return mux
}

func nonNil(as []Array) []Array {
	if as == nil {
		return []Array{}
	}
	return as
}

func number(w http.ResponseWriter, r *http.Request) (int, bool) {
	s := r.PathValue("n")
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n >= MaxDevice {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("array number %q: want a device number N of /dev/ublkbN", s))
		return 0, false
	}
	return n, true
}

// readJSON decodes the request's body into v (see decodeBody), answering
// 400 itself when it is refused.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err == nil {
		err = decodeBody(body, v)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "request body: "+err.Error())
		return false
	}
	return true
}

// noBody refuses (400) a request that carries a body where the endpoint
// takes none, as readJSON refuses fields it does not know: what a client
// sent is never silently ignored.
func noBody(w http.ResponseWriter, r *http.Request) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err == nil && len(bytes.Trim(body, jsonSpace)) != 0 {
		err = errors.New("this endpoint takes none")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "request body: "+err.Error())
		return false
	}
	return true
}

// decodeBody decodes body, one JSON object, into v, a pointer to a
// request struct, strictly: the body must be UTF-8 (JSON decoding would
// replace invalid bytes, silently naming another device), every key must
// be one of v's fields spelled exactly as documented (encoding/json would
// also take "Level" for "level") and given once, and nothing but white
// space may follow the object. Nothing is acted on before this passes.
func decodeBody(body []byte, v any) error {
	if len(body) > maxBody {
		return fmt.Errorf("larger than %d bytes", maxBody)
	}
	if len(bytes.Trim(body, jsonSpace)) == 0 {
		return errors.New("empty body")
	}
	if !utf8.Valid(body) {
		return errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if rest := bytes.Trim(body[dec.InputOffset():], jsonSpace); len(rest) != 0 {
		return fmt.Errorf("data after the JSON object (offset %d)", dec.InputOffset())
	}
	return checkKeys(body, v)
}

// jsonSpace is JSON's white space.
const jsonSpace = " \t\r\n"

// checkKeys checks the keys of the JSON object body (already decoded
// without error) against the json tags of the struct v points to.
func checkKeys(body []byte, v any) error {
	known := map[string]bool{}
	t := reflect.TypeOf(v).Elem()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		known[name] = true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errors.New("not a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		switch {
		case !known[key]:
			return fmt.Errorf("json: unknown field %q", key)
		case seen[key]:
			return fmt.Errorf("field %q given twice", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return nil
}

func reply(w http.ResponseWriter, code int, v any, err error) {
	if err != nil {
		writeError(w, statusOf(err), err.Error())
		return
	}
	writeJSON(w, code, v)
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, http.StatusMethodNotAllowed, "method not allowed: use "+allow)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, ErrorBody{Error: singleLine(msg)})
}

// singleLine is an error message on one line: the CLI prints it as is.
func singleLine(msg string) string { return strings.ReplaceAll(msg, "\n", "; ") }

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
