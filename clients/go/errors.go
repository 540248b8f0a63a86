package sessiontodo

import (
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error is a failed call with what the server said of it: the code, the message, and the
// google.rpc details every sessiontodo error carries (ErrorInfo's reason and metadata, and
// BadRequest's field violations on INVALID_ARGUMENT). errors.As(err, &sessiontodoError) finds it.
type Error struct {
	Code       codes.Code
	Message    string
	Reason     string            // ErrorInfo.reason: NOT_FOUND, REVISION_CONFLICT, REQUEST_ID_REUSED…
	Metadata   map[string]string // ErrorInfo.metadata: sessionId, expectedRevision…
	Violations []Violation       // BadRequest: which field is wrong and why
	status     *status.Status
}

// Violation is one wrong field of a request, named by its path ("todos[2].id").
type Violation struct {
	Field       string
	Description string
}

func (e *Error) Error() string {
	text := fmt.Sprintf("sessiontodo: %s: %s", e.Code, e.Message)
	for _, violation := range e.Violations {
		text += fmt.Sprintf("; %s: %s", violation.Field, violation.Description)
	}
	return text
}

// GRPCStatus lets status.Code and status.Convert read an *Error as the status it came from.
func (e *Error) GRPCStatus() *status.Status {
	return e.status
}

// asError turns a gRPC error into an *Error (nil stays nil; a context's error is kept as it is).
func asError(err error) error {
	st, ok := status.FromError(err)
	if err == nil || !ok {
		return err
	}
	typed := &Error{Code: st.Code(), Message: st.Message(), status: st}
	for _, detail := range st.Details() {
		switch detail := detail.(type) {
		case *errdetails.ErrorInfo:
			typed.Reason, typed.Metadata = detail.Reason, detail.Metadata
		case *errdetails.BadRequest:
			for _, violation := range detail.FieldViolations {
				typed.Violations = append(typed.Violations, Violation{violation.Field, violation.Description})
			}
		}
	}
	return typed
}
