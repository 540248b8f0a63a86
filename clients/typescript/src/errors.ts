/**
 * Typed errors: one class per status code sessiontodo chooses, carrying every google.rpc detail
 * of the `grpc-status-details-bin` trailer (ErrorInfo, BadRequest, QuotaFailure, RetryInfo).
 */

import { Code, ConnectError } from "@connectrpc/connect";
import { durationMs } from "@bufbuild/protobuf/wkt";

import { BadRequestSchema, ErrorInfoSchema, QuotaFailureSchema, RetryInfoSchema } from "./gen/google/rpc/error_details_pb.js";

export { Code };

/** One problem of a request (google.rpc.BadRequest): `field` is a path such as `todos[2].content`. */
export interface FieldViolation {
  readonly field: string;
  readonly description: string;
}

/** One limit reached (google.rpc.QuotaFailure): `subject` names it, such as `sessions` or `memory`. */
export interface QuotaViolation {
  readonly subject: string;
  readonly description: string;
}

export interface ErrorDetails {
  /** ErrorInfo's reason, such as `SESSION_NOT_FOUND` or `REVISION_MISMATCH`; "" without ErrorInfo. */
  readonly reason?: string;
  /** ErrorInfo's lowerCamel metadata: `sessionId`, `todoId`, `expectedRevision`, `actualRevision`… */
  readonly metadata?: Readonly<Record<string, string>>;
  readonly violations?: readonly FieldViolation[];
  readonly quotaViolations?: readonly QuotaViolation[];
  /** RetryInfo's delay, on UNAVAILABLE: wait at least this long before trying again. */
  readonly retryDelayMs?: number;
}

/** The canonical gRPC name of a status code: `NOT_FOUND`, `CANCELLED`. */
export function codeName(code: Code): string {
  if (code === Code.Canceled) return "CANCELLED";
  return (Code[code] ?? `CODE_${code}`).replace(/(?<=[a-z])(?=[A-Z])/g, "_").toUpperCase();
}

/** A call failed: `code` is the gRPC status, the google.rpc details are unpacked into the other fields. */
export class ServiceError extends Error {
  readonly code: Code;
  /** The server's message, without the code prefixed to `message`. */
  readonly rawMessage: string;
  readonly reason: string;
  readonly metadata: Readonly<Record<string, string>>;
  readonly violations: readonly FieldViolation[];
  readonly quotaViolations: readonly QuotaViolation[];
  readonly retryDelayMs: number | undefined;

  constructor(code: Code, rawMessage: string, details: ErrorDetails = {}, options?: { cause?: unknown }) {
    super(`${codeName(code)}: ${rawMessage}`, options);
    this.name = new.target.name;
    this.code = code;
    this.rawMessage = rawMessage;
    this.reason = details.reason ?? "";
    this.metadata = { ...details.metadata };
    this.violations = [...(details.violations ?? [])];
    this.quotaViolations = [...(details.quotaViolations ?? [])];
    this.retryDelayMs = details.retryDelayMs;
  }

  /**
   * The write of a `batchWrite` that failed the batch (ErrorInfo's `writeIndex`); undefined when
   * the error is not one write's (the whole batch was refused, or the call was not a batch).
   */
  get writeIndex(): number | undefined {
    const index = this.metadata.writeIndex ?? "";
    return /^\d+$/.test(index) ? Number(index) : undefined;
  }
}

export class InvalidArgument extends ServiceError {}
export class NotFound extends ServiceError {}
/** The expected revision did not match: re-read, then retry the read-modify-write. */
export class Aborted extends ServiceError {}
export class FailedPrecondition extends ServiceError {}
/**
 * A claim, renewal or release that the todo's state refuses; `reason` says why: `TODO_TAKEN`
 * (`owner` has it), `TODO_BLOCKED` (`blockedBy`: its unfinished blockers), `TODO_NOT_PENDING` (it
 * is `status`), or `CLAIM_NOT_HELD` (the caller does not hold it: `owner` does; a lapsed lease ends so).
 */
export class ClaimRefused extends FailedPrecondition {
  get owner(): string {
    return this.metadata.owner ?? "";
  }

  get blockedBy(): string[] {
    return (this.metadata.blockedBy ?? "").split(",").filter((id) => id !== "");
  }

  get status(): string {
    return this.metadata.status ?? "";
  }
}

/** The ErrorInfo reasons of FAILED_PRECONDITION that `ClaimRefused` stands for. */
const CLAIM_REFUSALS = new Set(["TODO_TAKEN", "TODO_BLOCKED", "TODO_NOT_PENDING", "CLAIM_NOT_HELD"]);

export class ResourceExhausted extends ServiceError {}
/** The service could not be reached, or the connection was lost: retry with backoff. */
export class Unavailable extends ServiceError {}
/** No bearer token, or one the server does not know. */
export class Unauthenticated extends ServiceError {}
/** The token's role may not make this call. */
export class PermissionDenied extends ServiceError {}

const ERRORS = new Map<Code, typeof ServiceError>([
  [Code.InvalidArgument, InvalidArgument],
  [Code.NotFound, NotFound],
  [Code.Aborted, Aborted],
  [Code.FailedPrecondition, FailedPrecondition],
  [Code.ResourceExhausted, ResourceExhausted],
  [Code.Unavailable, Unavailable],
  [Code.Unauthenticated, Unauthenticated],
  [Code.PermissionDenied, PermissionDenied],
]);

/**
 * Node's codes for a connection that failed or broke. connect-node reports a reset connection as
 * ABORTED and a refused certificate as INTERNAL; for sessiontodo ABORTED means a revision
 * mismatch, so these become UNAVAILABLE, as grpc-js and grpcio report them (the Node error stays
 * the `cause`).
 */
const CONNECTION_FAILURES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ERR_HTTP2_GOAWAY_SESSION",
  "ERR_HTTP2_INVALID_SESSION",
  "ERR_HTTP2_SESSION_ERROR",
  "ERR_HTTP2_STREAM_CANCEL",
  "ERR_HTTP2_STREAM_ERROR",
  "ERR_HTTP2_PING_CANCEL",
  "ERR_STREAM_DESTROYED",
  "ERR_STREAM_PREMATURE_CLOSE",
]);
/** OpenSSL's and Node's codes for a TLS handshake that failed (an unknown CA, a wrong host name…). */
const TLS_FAILURE = /^(?:ERR_TLS_|ERR_SSL_|UNABLE_TO_|CERT_|INVALID_CA$|DEPTH_ZERO_SELF_SIGNED_CERT$|SELF_SIGNED_CERT_IN_CHAIN$|HOSTNAME_MISMATCH$)/;

/**
 * Whether the call failed because the connection did. A CANCELLED this client sees is one too:
 * it never cancels a call it still awaits, and connect-node reports the streams of a connection
 * that vanished (a killed server) as reset with CANCEL.
 */
function brokeTheConnection(error: ConnectError): boolean {
  if (error.code === Code.Canceled) return true;
  const seen = new Set<unknown>();
  for (let cause: unknown = error.cause; cause instanceof Error && !seen.has(cause); cause = cause.cause) {
    seen.add(cause);
    const code = (cause as { code?: unknown }).code;
    if (typeof code === "string" && (CONNECTION_FAILURES.has(code) || TLS_FAILURE.test(code))) return true;
  }
  return false;
}

/** The typed error for a failed call, with its google.rpc details unpacked; other errors pass through. */
export function serviceError(error: unknown): unknown {
  if (error instanceof ServiceError || !(error instanceof ConnectError)) return error;
  const code = brokeTheConnection(error) ? Code.Unavailable : error.code;
  const [info] = error.findDetails(ErrorInfoSchema);
  const [badRequest] = error.findDetails(BadRequestSchema);
  const [quota] = error.findDetails(QuotaFailureSchema);
  const [retry] = error.findDetails(RetryInfoSchema);
  const ErrorClass =
    code === Code.FailedPrecondition && CLAIM_REFUSALS.has(info?.reason ?? "")
      ? ClaimRefused
      : (ERRORS.get(code) ?? ServiceError);
  return new ErrorClass(
    code,
    error.rawMessage,
    {
      reason: info?.reason,
      metadata: info?.metadata,
      violations: badRequest?.fieldViolations.map(({ field, description }) => ({ field, description })),
      quotaViolations: quota?.violations.map(({ subject, description }) => ({ subject, description })),
      retryDelayMs: retry?.retryDelay && durationMs(retry.retryDelay),
    },
    { cause: error },
  );
}
