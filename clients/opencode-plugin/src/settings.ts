/**
 * The plugin's options, given beside its path in opencode.json and read once at start-up:
 *
 *     "plugin": [["/path/to/@sessiontodo/opencode-plugin", {"address": "127.0.0.1:50051"}]]
 *
 * Anything unknown or of the wrong type stops the plugin with a message that names it.
 */

import { ChannelSecurity } from "@sessiontodo/client";

export interface PluginSettings {
  /** `host:port` of the sessiontodo server. */
  readonly address: string;
  /** The origin every write carries (watchers and feeds see who wrote). */
  readonly origin: string;
  readonly security: ChannelSecurity;
}

const DEFAULTS = { address: "127.0.0.1:50051", origin: "opencode" };
const STRINGS = ["address", "origin", "caFile", "clientCert", "clientKey", "tokenFile"] as const;
const BOOLEANS = ["tls"] as const;

export function pluginSettings(options: Readonly<Record<string, unknown>> = {}): PluginSettings {
  const known: readonly string[] = [...STRINGS, ...BOOLEANS];
  for (const [key, value] of Object.entries(options)) {
    if (!known.includes(key)) throw new Error(`sessiontodo plugin: unknown option "${key}" (known: ${known.join(", ")})`);
    const type = (BOOLEANS as readonly string[]).includes(key) ? "boolean" : "string";
    if (typeof value !== type || value === "") {
      throw new Error(`sessiontodo plugin: option "${key}" must be a non-empty ${type}, not ${JSON.stringify(value)}`);
    }
  }
  const text = (key: (typeof STRINGS)[number]) => options[key] as string | undefined;
  return {
    address: text("address") ?? DEFAULTS.address,
    origin: text("origin") ?? DEFAULTS.origin,
    security: ChannelSecurity.fromFiles({
      tls: options.tls as boolean | undefined,
      caFile: text("caFile"),
      clientCertFile: text("clientCert"),
      clientKeyFile: text("clientKey"),
      tokenFile: text("tokenFile"),
    }),
  };
}
