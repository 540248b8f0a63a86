// Package sessiontodo is the typed Go client of the sessiontodo service: a connection that waits
// for a starting server and retries what is safe to retry, the common calls, and watches that
// resume by revision or cursor. The generated stubs are in sessiontodov1 for everything else.
//
//	client, err := sessiontodo.Dial("127.0.0.1:50051")
//	session, err := client.CreateSession(ctx, "")
//	revision, err := client.ReplaceTodos(ctx, session.SessionId, []*sessiontodov1.Todo{{Content: "Dial"}})
//	err = client.Watch(ctx, session.SessionId, func(change *sessiontodov1.WatchTodosResponse) error { … })
package sessiontodo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/sessiontodo/sessiontodo/clients/go/sessiontodov1"
)

// DefaultPort is the server's port when a target names only a host.
const DefaultPort = "50051"

// Client is a connection to one sessiontodo server. It is safe for concurrent use.
type Client struct {
	conn    *grpc.ClientConn
	RPC     sessiontodov1.TodoServiceClient // the generated stub, for calls the client does not wrap
	retry   RetryPolicy
	timeout time.Duration
	origin  string
}

// Option configures Dial.
type Option func(*settings) error

type settings struct {
	security []grpc.DialOption
	token    string
	retry    RetryPolicy
	timeout  time.Duration
	origin   string
}

// WithTLS trusts the CA in caFile (PEM) for the server's certificate, which must name the host
// dialled. Without it the connection is plaintext, as to 127.0.0.1.
func WithTLS(caFile string) Option {
	return func(s *settings) error {
		tlsCredentials, err := credentials.NewClientTLSFromFile(caFile, "")
		if err != nil {
			return err
		}
		s.security = []grpc.DialOption{grpc.WithTransportCredentials(tlsCredentials)}
		return nil
	}
}

// WithToken sends "authorization: Bearer <token>" on every call; it needs WithTLS.
func WithToken(token string) Option {
	return func(s *settings) error {
		s.token = strings.TrimSpace(token)
		return nil
	}
}

// WithTokenFile is WithToken with the token read from a file.
func WithTokenFile(path string) Option {
	return func(s *settings) error {
		token, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		s.token = strings.TrimSpace(string(token))
		return nil
	}
}

// WithRetry replaces DefaultRetry.
func WithRetry(policy RetryPolicy) Option {
	return func(s *settings) error {
		s.retry = policy
		return nil
	}
}

// WithTimeout bounds each unary call whose context has no deadline (10 s by default), waiting for
// a starting server included.
func WithTimeout(timeout time.Duration) Option {
	return func(s *settings) error {
		s.timeout = timeout
		return nil
	}
}

// WithOrigin names the writer in every change this client makes ("my-agent"), unless a request
// sets its own.
func WithOrigin(origin string) Option {
	return func(s *settings) error {
		s.origin = origin
		return nil
	}
}

// Dial connects to target ("host:port", or a host alone for DefaultPort). The connection is made
// in the background: calls wait for it (a server that is starting costs no error) within their
// deadline.
func Dial(target string, options ...Option) (*Client, error) {
	s := settings{security: []grpc.DialOption{grpc.WithInsecure()}, retry: DefaultRetry, timeout: 10 * time.Second}
	for _, option := range options {
		if err := option(&s); err != nil {
			return nil, err
		}
	}
	if s.token != "" {
		s.security = append(s.security, grpc.WithPerRPCCredentials(bearerToken(s.token)))
	}
	if !strings.Contains(target, ":") {
		target += ":" + DefaultPort
	}
	conn, err := grpc.Dial(target, append(s.security,
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true)),
		// Ping a quiet connection, but not under 10 s: sessiontodo closes the connection of a
		// client that pings more often (GOAWAY too_many_pings).
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 20 * time.Second, PermitWithoutStream: true}),
		// Reconnect within 2 s of a restart, as the other typed clients do (gRPC's default grows to 120 s).
		grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: 20 * time.Second, Backoff: backoff.Config{
			BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second,
		}}),
	)...)
	if err != nil {
		return nil, fmt.Errorf("sessiontodo: dial %s: %w", target, err)
	}
	return &Client{conn: conn, RPC: sessiontodov1.NewTodoServiceClient(conn), retry: s.retry, timeout: s.timeout, origin: s.origin}, nil
}

// Close ends the connection and every call on it.
func (c *Client) Close() error {
	return c.conn.Close()
}

// CreateSession creates a session; an empty sessionID makes one ("ses_" and 32 hex digits). The id
// is chosen before the first try, so a retried call finds the session it created.
func (c *Client) CreateSession(ctx context.Context, sessionID string) (*sessiontodov1.Session, error) {
	if sessionID == "" {
		sessionID = "ses_" + randomHex(16)
	}
	request := &sessiontodov1.CreateSessionRequest{SessionId: sessionID, Origin: c.origin}
	response, err := unary(ctx, c, true, func(ctx context.Context) (*sessiontodov1.CreateSessionResponse, error) {
		return c.RPC.CreateSession(ctx, request)
	})
	if err != nil {
		return nil, err
	}
	return response.Session, nil
}

// RemoveSession removes a session and its descendants, and returns their ids.
func (c *Client) RemoveSession(ctx context.Context, sessionID string) ([]string, error) {
	request := &sessiontodov1.RemoveSessionRequest{SessionId: sessionID, Origin: c.origin}
	response, err := unary(ctx, c, false, func(ctx context.Context) (*sessiontodov1.RemoveSessionResponse, error) {
		return c.RPC.RemoveSession(ctx, request)
	})
	if err != nil {
		return nil, err
	}
	return response.RemovedSessionIds, nil
}

// GetTodos reads a session's list and its revision.
func (c *Client) GetTodos(ctx context.Context, sessionID string) ([]*sessiontodov1.Todo, uint64, error) {
	request := &sessiontodov1.GetTodosRequest{SessionId: sessionID}
	response, err := unary(ctx, c, true, func(ctx context.Context) (*sessiontodov1.GetTodosResponse, error) {
		return c.RPC.GetTodos(ctx, request)
	})
	if err != nil {
		return nil, 0, err
	}
	return response.Todos, response.Revision, nil
}

// ReplaceTodos sets a session's whole list and returns the new revision. It is sent as a
// BatchWrite of one replace with a request id made once, so a retry never applies it twice.
func (c *Client) ReplaceTodos(ctx context.Context, sessionID string, todos []*sessiontodov1.Todo) (uint64, error) {
	replace := &sessiontodov1.ReplaceTodosRequest{SessionId: sessionID, Todos: todos}
	results, err := c.BatchWrite(ctx, &sessiontodov1.Write{Operation: &sessiontodov1.Write_ReplaceTodos{ReplaceTodos: replace}})
	if err != nil {
		return 0, err
	}
	return results[0].Revision, nil
}

// AddTodo appends a todo (the server makes its id when it has none) and returns it as stored with
// the new revision; a request id made once keeps a retry from adding it twice.
func (c *Client) AddTodo(ctx context.Context, sessionID string, todo *sessiontodov1.Todo) (*sessiontodov1.Todo, uint64, error) {
	request := &sessiontodov1.AddTodoRequest{SessionId: sessionID, Todo: todo, RequestId: "add-" + randomHex(16), Origin: c.origin}
	response, err := unary(ctx, c, true, func(ctx context.Context) (*sessiontodov1.AddTodoResponse, error) {
		return c.RPC.AddTodo(ctx, request)
	})
	if err != nil {
		return nil, 0, err
	}
	return response.Todo, response.Revision, nil
}

// SetStatus changes one todo's status and returns the new revision (the same one when it already
// had that status). Setting a status twice is harmless, so it is retried.
func (c *Client) SetStatus(ctx context.Context, sessionID, todoID string, status sessiontodov1.TodoStatus) (uint64, error) {
	request := &sessiontodov1.UpdateTodoRequest{SessionId: sessionID, TodoId: todoID, Status: status, Origin: c.origin}
	response, err := unary(ctx, c, true, func(ctx context.Context) (*sessiontodov1.UpdateTodoResponse, error) {
		return c.RPC.UpdateTodo(ctx, request)
	})
	if err != nil {
		return 0, err
	}
	return response.Revision, nil
}

// BatchWrite applies writes atomically (all or none) and returns one result per write. The
// request id is made once, so the retry of a batch whose answer was lost returns the first answer.
func (c *Client) BatchWrite(ctx context.Context, writes ...*sessiontodov1.Write) ([]*sessiontodov1.WriteResult, error) {
	request := &sessiontodov1.BatchWriteRequest{Writes: writes, RequestId: "batch-" + randomHex(16), Origin: c.origin}
	response, err := unary(ctx, c, true, func(ctx context.Context) (*sessiontodov1.BatchWriteResponse, error) {
		return c.RPC.BatchWrite(ctx, request)
	})
	if err != nil {
		return nil, err
	}
	return response.Results, nil
}

// unary makes one call within the client's timeout (when ctx has none), retried by the client's
// policy when retried is true, and returns its error as an *Error.
func unary[Response any](ctx context.Context, c *Client, retried bool, call func(context.Context) (Response, error)) (Response, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	policy := c.retry
	if !retried {
		policy.Attempts = 1
	}
	var response Response
	err := policy.run(ctx, func() error {
		var err error
		response, err = call(ctx)
		return err
	})
	return response, asError(err)
}

// bearerToken is grpc-go's per-call credentials for sessiontodo's "authorization: Bearer <token>".
type bearerToken string

func (token bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(token)}, nil
}

// RequireTransportSecurity keeps the token off plaintext: Dial refuses it without WithTLS.
func (bearerToken) RequireTransportSecurity() bool {
	return true
}

func randomHex(bytes int) string {
	buffer := make([]byte, bytes)
	if _, err := rand.Read(buffer); err != nil {
		panic(err) // the system's random source failed: nothing sensible is left to do
	}
	return hex.EncodeToString(buffer)
}
