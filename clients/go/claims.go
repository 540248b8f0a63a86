package sessiontodo

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sessiontodo/sessiontodo/clients/go/sessiontodov1"
)

// ReadyTodos reads the todos of a session that are free to take: PENDING, unowned, and every
// blocker COMPLETED or CANCELLED, in list order.
func (c *Client) ReadyTodos(ctx context.Context, sessionID string) ([]*sessiontodov1.Todo, uint64, error) {
	request := &sessiontodov1.GetTodosRequest{SessionId: sessionID, Filter: &sessiontodov1.TodoFilter{Ready: true}}
	response, err := unary(ctx, c, true, func(ctx context.Context) (*sessiontodov1.GetTodosResponse, error) {
		return c.RPC.GetTodos(ctx, request)
	})
	if err != nil {
		return nil, 0, err
	}
	return response.Todos, response.Revision, nil
}

// ClaimTodo gives a todo to owner and sets it IN_PROGRESS, atomically: of concurrent claimers
// exactly one wins. An empty todoID claims the first ready todo in list order, and a nil todo
// with no error means nothing is ready. A lease above zero makes the claim lapse unless renewed
// (RenewClaim) within it. A refusal is an *Error with Reason TODO_TAKEN (Metadata["owner"]),
// TODO_BLOCKED (Metadata["blockedBy"]) or TODO_NOT_PENDING. A request id made once keeps a
// retry from claiming a second todo.
func (c *Client) ClaimTodo(ctx context.Context, sessionID, todoID, owner string, lease time.Duration) (*sessiontodov1.Todo, uint64, error) {
	request := &sessiontodov1.ClaimTodoRequest{
		SessionId: sessionID, TodoId: todoID, Owner: owner, RequestId: "claim-" + randomHex(16), Origin: c.origin,
	}
	if lease > 0 {
		request.LeaseDuration = durationpb.New(lease)
	}
	response, err := unary(ctx, c, true, func(ctx context.Context) (*sessiontodov1.ClaimTodoResponse, error) {
		return c.RPC.ClaimTodo(ctx, request)
	})
	if err != nil {
		return nil, 0, err
	}
	return response.Todo, response.Revision, nil
}

// RenewClaim extends the lease of owner's claim of a todo by its own duration from now. It fails
// with Reason CLAIM_NOT_HELD when the claim is no longer owner's (its lease lapsed, say).
func (c *Client) RenewClaim(ctx context.Context, sessionID, todoID, owner string) (*sessiontodov1.Todo, error) {
	request := &sessiontodov1.RenewClaimRequest{SessionId: sessionID, TodoId: todoID, Owner: owner, Origin: c.origin}
	response, err := unary(ctx, c, true, func(ctx context.Context) (*sessiontodov1.RenewClaimResponse, error) {
		return c.RPC.RenewClaim(ctx, request)
	})
	if err != nil {
		return nil, err
	}
	return response.Todo, nil
}

// ReleaseTodo gives owner's claimed todo back: unowned and PENDING again. It is tried once (a
// retry after a lost answer would find the claim gone and fail with CLAIM_NOT_HELD).
func (c *Client) ReleaseTodo(ctx context.Context, sessionID, todoID, owner string) (*sessiontodov1.Todo, error) {
	request := &sessiontodov1.ReleaseTodoRequest{SessionId: sessionID, TodoId: todoID, Owner: owner, Origin: c.origin}
	response, err := unary(ctx, c, false, func(ctx context.Context) (*sessiontodov1.ReleaseTodoResponse, error) {
		return c.RPC.ReleaseTodo(ctx, request)
	})
	if err != nil {
		return nil, err
	}
	return response.Todo, nil
}
