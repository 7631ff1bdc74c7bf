package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
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
	AddSpare(n int, member string, force bool) (Array, error)
	Replace(n int, member, with string, force bool) (Array, error)
	Check(n int) (Array, error)
	Repair(n int) (Array, error)
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
			reply(w, http.StatusOK, res, err)
		default:
			methodNotAllowed(w, "GET, POST, DELETE")
		}
	})
	mux.HandleFunc(APIVersion+"/arrays/{n}", func(w http.ResponseWriter, r *http.Request) {
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
	memberOp := func(op func(n int, req MemberRequest) (Array, error)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			n, ok := number(w, r)
			if !ok {
				return
			}
			if r.Method != http.MethodPost {
				methodNotAllowed(w, "POST")
				return
			}
			var req MemberRequest
			if !readJSON(w, r, &req) {
				return
			}
			if req.Member == "" {
				writeError(w, http.StatusBadRequest, "member: missing (a path or a role number)")
				return
			}
			a, err := op(n, req)
			reply(w, http.StatusOK, a, err)
		}
	}
	arrayOp := func(op func(n int) (Array, error)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			n, ok := number(w, r)
			if !ok {
				return
			}
			if r.Method != http.MethodPost {
				methodNotAllowed(w, "POST")
				return
			}
			a, err := op(n)
			reply(w, http.StatusOK, a, err)
		}
	}
	mux.Handle(APIVersion+"/arrays/{n}/fail", memberOp(func(n int, q MemberRequest) (Array, error) { return b.Fail(n, q.Member) }))
	mux.Handle(APIVersion+"/arrays/{n}/remove", memberOp(func(n int, q MemberRequest) (Array, error) { return b.Remove(n, q.Member) }))
	mux.Handle(APIVersion+"/arrays/{n}/re-add", memberOp(func(n int, q MemberRequest) (Array, error) { return b.ReAdd(n, q.Member) }))
	mux.Handle(APIVersion+"/arrays/{n}/add-spare", memberOp(func(n int, q MemberRequest) (Array, error) { return b.AddSpare(n, q.Member, q.Force) }))
	mux.Handle(APIVersion+"/arrays/{n}/replace", memberOp(func(n int, q MemberRequest) (Array, error) { return b.Replace(n, q.Member, q.With, q.Force) }))
	mux.Handle(APIVersion+"/arrays/{n}/check", arrayOp(b.Check))
	mux.Handle(APIVersion+"/arrays/{n}/repair", arrayOp(b.Repair))
	mux.HandleFunc(APIVersion+"/version", func(w http.ResponseWriter, r *http.Request) {
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
	if err != nil || n < 0 || n >= 1<<20 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("array number %q: want a device number N of /dev/ublkbN", s))
		return 0, false
	}
	return n, true
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if errors.Is(err, io.EOF) {
		err = errors.New("empty body")
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "request body: "+err.Error())
		return false
	}
	return true
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
	// One line: the CLI prints it as is.
	writeJSON(w, code, ErrorBody{Error: strings.ReplaceAll(msg, "\n", "; ")})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
