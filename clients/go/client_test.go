package sessiontodo_test

// These tests run against a real sessiontodo server: tests/peers/go/test_go_client.py starts one
// (ending every connection after about 2 s, so watches must resume) and sets SESSIONTODO_ADDRESS.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	sessiontodo "github.com/sessiontodo/sessiontodo/clients/go"
	"github.com/sessiontodo/sessiontodo/clients/go/sessiontodov1"
)

func dial(t *testing.T) *sessiontodo.Client {
	t.Helper()
	address := os.Getenv("SESSIONTODO_ADDRESS")
	if address == "" {
		t.Fatal("SESSIONTODO_ADDRESS names the server under test (tests/peers/go starts one)")
	}
	client, err := sessiontodo.Dial(address, sessiontodo.WithOrigin("go-test"), sessiontodo.WithTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

func contents(todos []*sessiontodov1.Todo) []string {
	names := []string{}
	for _, todo := range todos {
		names = append(names, todo.Content)
	}
	return names
}

func TestWritesAreReadBack(t *testing.T) {
	client, ctx := dial(t), context.Background()
	session, err := client.CreateSession(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	revision, err := client.ReplaceTodos(ctx, session.SessionId, []*sessiontodov1.Todo{{Id: "a", Content: "Dial"}, {Content: "Watch"}})
	if err != nil || revision != 1 {
		t.Fatalf("replace: revision %d, %v", revision, err)
	}
	added, revision, err := client.AddTodo(ctx, session.SessionId, &sessiontodov1.Todo{Content: "Resume"})
	if err != nil || revision != 2 || added.Id == "" {
		t.Fatalf("add: %v at %d, %v", added, revision, err)
	}
	if revision, err = client.SetStatus(ctx, session.SessionId, "a", sessiontodov1.TodoStatus_TODO_STATUS_COMPLETED); err != nil || revision != 3 {
		t.Fatalf("status: revision %d, %v", revision, err)
	}
	todos, revision, err := client.GetTodos(ctx, session.SessionId)
	if err != nil || revision != 3 || fmt.Sprint(contents(todos)) != "[Dial Watch Resume]" {
		t.Fatalf("read %v at %d, %v", contents(todos), revision, err)
	}
	if todos[0].Status != sessiontodov1.TodoStatus_TODO_STATUS_COMPLETED {
		t.Fatalf("first todo %v", todos[0])
	}
	removed, err := client.RemoveSession(ctx, session.SessionId)
	if err != nil || fmt.Sprint(removed) != fmt.Sprintf("[%s]", session.SessionId) {
		t.Fatalf("removed %v, %v", removed, err)
	}
}

func TestErrorsCarryTheirDetails(t *testing.T) {
	client, ctx := dial(t), context.Background()
	_, _, err := client.GetTodos(ctx, "ses_missing")
	var missing *sessiontodo.Error
	if !errors.As(err, &missing) || missing.Code != codes.NotFound || missing.Reason != "SESSION_NOT_FOUND" {
		t.Fatalf("missing session: %#v", err)
	}
	session, err := client.CreateSession(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.ReplaceTodos(ctx, session.SessionId, []*sessiontodov1.Todo{{Content: ""}, {Id: "a", Content: "One"}, {Id: "a", Content: "Two"}})
	var invalid *sessiontodo.Error
	if !errors.As(err, &invalid) || invalid.Code != codes.InvalidArgument {
		t.Fatalf("bad list: %#v", err)
	}
	fields := []string{}
	for _, violation := range invalid.Violations {
		fields = append(fields, violation.Field)
	}
	if fmt.Sprint(fields) != "[writes[0].replace_todos.todos[0].content writes[0].replace_todos.todos[2].id]" {
		t.Fatalf("violations %v", invalid.Violations)
	}
}

// The server ends every connection after about 2 s: a watch that lasts longer resumes after the
// last revision it delivered, and sees every revision once, in order.
func TestWatchResumesAcrossBrokenConnections(t *testing.T) {
	client, ctx := dial(t), context.Background()
	session, err := client.CreateSession(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	const writes = 25
	done := make(chan error, 1)
	go func() {
		for i := 1; i <= writes; i++ {
			if _, _, err := client.AddTodo(ctx, session.SessionId, &sessiontodov1.Todo{Content: fmt.Sprint(i)}); err != nil {
				done <- err
				return
			}
			time.Sleep(200 * time.Millisecond) // 5 s of writes: at least two broken connections
		}
		_, err := client.RemoveSession(ctx, session.SessionId)
		done <- err
	}()
	var revisions []uint64
	err = client.Watch(ctx, session.SessionId, func(change *sessiontodov1.WatchTodosResponse) error {
		if change.Kind != sessiontodov1.ChangeKind_CHANGE_KIND_SESSION_REMOVED {
			revisions = append(revisions, change.Revision)
			if len(change.Todos) != int(change.Revision) {
				return fmt.Errorf("revision %d holds %d todos", change.Revision, len(change.Todos))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i, revision := range revisions[1:] {
		if revision != revisions[i]+1 {
			t.Fatalf("revisions not one by one: %v", revisions)
		}
	}
	if revisions[len(revisions)-1] != writes {
		t.Fatalf("the watch ended at revision %d, not %d: %v", revisions[len(revisions)-1], writes, revisions)
	}
}

// The feed follows one session (by filter) across broken connections: its snapshot, then every
// change once and in order, each with a cursor.
func TestFeedResumesAfterTheLastCursor(t *testing.T) {
	client, ctx := dial(t), context.Background()
	session, err := client.CreateSession(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	const writes = 25
	go func() {
		for i := 1; i <= writes; i++ {
			if _, _, err := client.AddTodo(ctx, session.SessionId, &sessiontodov1.Todo{Content: fmt.Sprint(i)}); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	var revisions []uint64
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	filter := &sessiontodov1.SessionFilter{SessionIds: []string{session.SessionId}}
	err = client.Feed(ctx, filter, func(change *sessiontodov1.WatchChangesResponse) error {
		switch change.Kind {
		case sessiontodov1.ChangeKind_CHANGE_KIND_RESET:
			revisions = nil // forget everything held: a snapshot follows
			return nil
		case sessiontodov1.ChangeKind_CHANGE_KIND_SNAPSHOT:
		default:
			if change.Cursor == "" {
				return fmt.Errorf("a change without a cursor: %v", change)
			}
		}
		revisions = append(revisions, change.Revision)
		if change.Revision == writes {
			return sessiontodo.ErrStop
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, revision := range revisions[1:] {
		if revision != revisions[i]+1 {
			t.Fatalf("revisions not one by one: %v", revisions)
		}
	}
}

// Of eight concurrent claimers of the first ready todo exactly one gets it; the blocked todo is
// refused with its blocker named, and a released todo is ready again.
func TestClaimsHaveOneWinner(t *testing.T) {
	client, ctx := dial(t), context.Background()
	session, err := client.CreateSession(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	graph := []*sessiontodov1.Todo{{Id: "a", Content: "Schema"}, {Id: "b", Content: "Handlers", BlockedBy: []string{"a"}}}
	if _, err := client.ReplaceTodos(ctx, session.SessionId, graph); err != nil {
		t.Fatal(err)
	}
	ready, _, err := client.ReadyTodos(ctx, session.SessionId)
	if err != nil || len(ready) != 1 || ready[0].Id != "a" || fmt.Sprint(ready[0].Blocks) != "[b]" {
		t.Fatalf("ready %v, %v", ready, err)
	}
	claims := make(chan string, 8)
	for worker := 0; worker < 8; worker++ {
		go func(owner string) {
			todo, _, err := client.ClaimTodo(ctx, session.SessionId, "", owner, time.Minute)
			switch {
			case err != nil:
				claims <- err.Error()
			case todo != nil:
				claims <- todo.Id + " by " + todo.Owner
			default:
				claims <- "nothing ready"
			}
		}(fmt.Sprint("worker-", worker))
	}
	won := 0
	for i := 0; i < 8; i++ {
		if claim := <-claims; claim != "nothing ready" {
			won++
			if !strings.HasPrefix(claim, "a by worker-") {
				t.Fatalf("claim: %s", claim)
			}
		}
	}
	if won != 1 {
		t.Fatalf("%d winners", won)
	}
	_, _, err = client.ClaimTodo(ctx, session.SessionId, "b", "late", 0)
	var blocked *sessiontodo.Error
	if !errors.As(err, &blocked) || blocked.Reason != "TODO_BLOCKED" || blocked.Metadata["blockedBy"] != "a" {
		t.Fatalf("claiming the blocked todo: %#v", err)
	}
	todos, _, err := client.GetTodos(ctx, session.SessionId)
	if err != nil {
		t.Fatal(err)
	}
	owner := todos[0].Owner
	if renewed, err := client.RenewClaim(ctx, session.SessionId, "a", owner); err != nil || renewed.LeaseExpiresAt == nil {
		t.Fatalf("renew: %v, %v", renewed, err)
	}
	if released, err := client.ReleaseTodo(ctx, session.SessionId, "a", owner); err != nil || released.Owner != "" {
		t.Fatalf("release: %v, %v", released, err)
	}
	if ready, _, err = client.ReadyTodos(ctx, session.SessionId); err != nil || len(ready) != 1 || ready[0].Id != "a" {
		t.Fatalf("ready after the release: %v, %v", ready, err)
	}
}

// A client started before its server waits for it within the call's deadline: the test program
// says "calling" and tests/peers/go starts the server a few seconds later.
func TestWaitsForAStartingServer(t *testing.T) {
	client := dial(t)
	fmt.Println("calling")
	session, err := client.CreateSession(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if session.Revision != 0 {
		t.Fatalf("new session at revision %d", session.Revision)
	}
}
