/**
 * How a client reaches a secured sessiontodo server: TLS, a client certificate, a bearer token.
 *
 * A token travels only over TLS or to a loopback address (`localhost`, 127.0.0.0/8, `[::1]`):
 * anything else is refused before a connection exists, so a token never crosses a network in
 * clear text. The same rule as the Python client's `ChannelSecurity`.
 */

import { readFileSync } from "node:fs";
import { isIP } from "node:net";

export interface ChannelSecurityOptions {
  /** Connect with TLS (implied by `rootCertificates` and `clientCertificate`). */
  readonly tls?: boolean;
  /** PEM CA bundle that signed the server certificate; default: Node's root certificates. */
  readonly rootCertificates?: string | Buffer;
  /** PEM client certificate for mutual TLS, with its key. */
  readonly clientCertificate?: string | Buffer;
  readonly clientKey?: string | Buffer;
  /** Bearer token sent with every call. */
  readonly token?: string;
}

/** The file-based form (what a configuration names): each file is read once, here. */
export interface SecurityFiles {
  readonly tls?: boolean;
  readonly caFile?: string;
  readonly clientCertFile?: string;
  readonly clientKeyFile?: string;
  readonly tokenFile?: string;
}

/** TLS, client certificate and token, checked for consistency when made. */
export class ChannelSecurity {
  readonly tls: boolean;
  readonly rootCertificates: string | Buffer | undefined;
  readonly clientCertificate: string | Buffer | undefined;
  readonly clientKey: string | Buffer | undefined;
  readonly token: string | undefined;

  constructor(options: ChannelSecurityOptions = {}) {
    if ((options.clientCertificate === undefined) !== (options.clientKey === undefined)) {
      throw new Error("a client certificate needs its key, and a key its certificate");
    }
    if ((options.rootCertificates !== undefined || options.clientCertificate !== undefined) && options.tls === false) {
      throw new Error("certificates are only used with tls: true");
    }
    this.tls = options.tls ?? (options.rootCertificates !== undefined || options.clientCertificate !== undefined);
    this.rootCertificates = options.rootCertificates;
    this.clientCertificate = options.clientCertificate;
    this.clientKey = options.clientKey;
    this.token = options.token || undefined;
    Object.freeze(this);
  }

  /** The material the files name; an empty token file is an error, surrounding whitespace is ignored. */
  static fromFiles(files: SecurityFiles): ChannelSecurity {
    const token = files.tokenFile === undefined ? undefined : readFileSync(files.tokenFile, "utf8").trim();
    if (token === "") throw new Error(`token file ${files.tokenFile} is empty`);
    const read = (path: string | undefined) => (path === undefined ? undefined : readFileSync(path));
    return new ChannelSecurity({
      tls: files.tls || files.caFile !== undefined || files.clientCertFile !== undefined,
      rootCertificates: read(files.caFile),
      clientCertificate: read(files.clientCertFile),
      clientKey: read(files.clientKeyFile),
      token,
    });
  }

  /**
   * Throws for a bearer token in plaintext to anything but a loopback address. (Letting the
   * connection fail later would look like UNAVAILABLE, which clients retry.)
   */
  check(target: string): void {
    if (this.token !== undefined && !this.tls && !isLoopback(target)) {
      throw new Error(`refusing to send a bearer token in plaintext to ${target}: use TLS or a loopback address`);
    }
  }
}

const SCHEME = /^(?:dns:(?:\/\/[^/]*\/)?|ipv4:|ipv6:)/;

/** `host:port` (or `[v6]:port`) of a gRPC target, without a `dns:`/`ipv4:`/`ipv6:` scheme. */
export function authority(target: string): string {
  return target.replace(SCHEME, "");
}

/**
 * Whether a gRPC target (`host:port`, `[v6]:port`, with an optional `dns:`/`ipv4:`/`ipv6:`
 * scheme) names this machine: `localhost` or a loopback address. A host name is never resolved.
 */
export function isLoopback(target: string): boolean {
  const address = authority(target);
  if (address.startsWith("[")) return isLoopbackHost(address.slice(1, address.indexOf("]")));
  const colon = address.lastIndexOf(":");
  const port = address.slice(colon + 1);
  return isLoopbackHost(colon > 0 && /^\d+$/.test(port) ? address.slice(0, colon) : address);
}

function isLoopbackHost(host: string): boolean {
  if (host.toLowerCase() === "localhost") return true;
  if (isIP(host) === 4) return host.split(".")[0] === "127";
  if (isIP(host) === 6) return new URL(`http://[${host}]`).hostname === "[::1]"; // the canonical form
  return false; // a name other than localhost may resolve to anything
}
