package sessiontodo

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sessiontodo/sessiontodo/clients/go/sessiontodov1"
)

// ErrStop ends a watch without an error when a handler returns it.
var ErrStop = errors.New("sessiontodo: stop watching")

// Watch hands every change of one session's list to handle, once and in order: a SNAPSHOT first,
// then each change with the full list after it (a RESET carries the whole list when changes were
// missed). When the stream breaks (UNAVAILABLE: a restart, a deploy) it resumes after the last
// revision delivered, for as long as ctx lasts. It returns nil when the session is removed (after
// the SESSION_REMOVED message) or handle returns ErrStop, handle's other errors as they are, ctx's
// error, and any non-transient failure (NOT_FOUND: no such session) as an *Error.
func (c *Client) Watch(ctx context.Context, sessionID string, handle func(*sessiontodov1.WatchTodosResponse) error) error {
	request := &sessiontodov1.WatchTodosRequest{SessionId: sessionID}
	return c.follow(ctx, func(ctx context.Context) (receive func() (bool, error), err error) {
		stream, err := c.RPC.WatchTodos(ctx, request)
		return func() (bool, error) {
			message, err := stream.Recv()
			if err != nil {
				return false, err
			}
			if message.Kind == sessiontodov1.ChangeKind_CHANGE_KIND_PROGRESS {
				return true, nil // alive, and the revision is the one held
			}
			revision := message.Revision
			request.AfterRevision = &revision
			if err := handle(message); err != nil {
				return false, err
			}
			return message.Kind != sessiontodov1.ChangeKind_CHANGE_KIND_SESSION_REMOVED, nil
		}, err
	})
}

// Feed hands every change of the sessions matching filter (nil: all of them) to handle, in commit
// order, starting with one SNAPSHOT per session and a PROGRESS bookmark. When the stream breaks
// it resumes after the last cursor received; a snapshot cut short is asked for again, announced
// by a RESET with an empty session id, as the server does when a cursor cannot be resumed:
// forget everything held and take the snapshot that follows. It returns as Watch does.
func (c *Client) Feed(ctx context.Context, filter *sessiontodov1.SessionFilter, handle func(*sessiontodov1.WatchChangesResponse) error) error {
	request := &sessiontodov1.WatchChangesRequest{IncludeSnapshot: true, Filter: filter}
	inSnapshot := false
	return c.follow(ctx, func(ctx context.Context) (receive func() (bool, error), err error) {
		if inSnapshot { // a partial snapshot cannot be resumed: start it again, and say so
			request.AfterCursor, request.IncludeSnapshot = "", true
			if err := handle(&sessiontodov1.WatchChangesResponse{Kind: sessiontodov1.ChangeKind_CHANGE_KIND_RESET}); err != nil {
				return nil, err
			}
		}
		stream, err := c.RPC.WatchChanges(ctx, request)
		return func() (bool, error) {
			message, err := stream.Recv()
			if err != nil {
				return false, err
			}
			starts := message.Kind == sessiontodov1.ChangeKind_CHANGE_KIND_SNAPSHOT || message.Kind == sessiontodov1.ChangeKind_CHANGE_KIND_RESET
			inSnapshot = starts || (inSnapshot && message.Cursor == "")
			if message.Cursor != "" {
				request.AfterCursor, request.IncludeSnapshot = message.Cursor, false
			}
			if message.Kind == sessiontodov1.ChangeKind_CHANGE_KIND_PROGRESS {
				return true, nil
			}
			return true, handle(message)
		}, err
	})
}

// follow opens a stream with open and reads it with the receive function open returns, until
// receive says it is done or fails; it opens the stream again after UNAVAILABLE (full-jitter
// delays of the client's retry policy, for as long as ctx lasts, the backoff starting over once
// a stream delivered).
func (c *Client) follow(ctx context.Context, open func(context.Context) (func() (bool, error), error)) error {
	for failures := 0; ; {
		delivered, err := c.followOnce(ctx, open)
		if errors.Is(err, ErrStop) {
			return nil
		}
		if err == nil || ctx.Err() != nil {
			return ctx.Err()
		}
		if status.Code(err) != codes.Unavailable {
			return asError(err)
		}
		if delivered {
			failures = 0
		}
		timer := time.NewTimer(c.retry.delay(failures))
		failures++
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
}

// followOnce reads one stream; delivered says that at least one message arrived.
func (c *Client) followOnce(ctx context.Context, open func(context.Context) (func() (bool, error), error)) (delivered bool, err error) {
	ctx, cancel := context.WithCancel(ctx) // no deadline: a watch lives as long as it is read
	defer cancel()
	receive, err := open(ctx)
	if err != nil {
		return false, err
	}
	for {
		more, err := receive()
		if err != nil || !more {
			return delivered, err
		}
		delivered = true
	}
}
