/**
 * `@sessiontodo/opencode-plugin`: OpenCode stores every session's todo list in sessiontodo
 * itself, with no process beside it. Listed in opencode.json by its folder, with options:
 *
 *     "plugin": [["/path/to/node_modules/@sessiontodo/opencode-plugin", {"address": "127.0.0.1:50051"}]]
 *
 * OpenCode loads it once per project directory it serves. Each `todo.updated` stores the full list
 * (ReplaceTodos), `session.created`/`session.updated` the session with its labels (title,
 * directory, project), `session.deleted` removes it; every write carries origin `opencode`.
 */

import type { Plugin, PluginModule } from "@opencode-ai/plugin";
import { TodoClient } from "@sessiontodo/client";

import { pluginSettings } from "./settings.js";
import { SessionSync, type LogLevel } from "./sync.js";

const SERVICE = "sessiontodo";

const server: Plugin = async ({ client }, options) => {
  const settings = pluginSettings(options);
  const todos = TodoClient.connect(settings.address, { security: settings.security });
  const log = (level: LogLevel, message: string): void => {
    client.app.log({ body: { service: SERVICE, level, message } }).catch(() => {});
  };
  const sync = new SessionSync(todos, {
    origin: settings.origin,
    log,
    // Without OpenCode's answer the session is stored without labels: its list matters more.
    lookup: async (sessionId) => (await client.session.get({ path: { id: sessionId } }).catch(() => undefined))?.data,
  });
  log("info", `storing every todo list in sessiontodo at ${settings.address}`);
  return {
    event: async ({ event }) => {
      if (event.type === "session.created" || event.type === "session.updated") {
        sync.sessionChanged(event.properties.info);
      } else if (event.type === "session.deleted") {
        sync.sessionDeleted(event.properties.info.id);
      } else if (event.type === "todo.updated") {
        sync.todosUpdated(event.properties.sessionID, event.properties.todos);
      }
    },
    dispose: async () => {
      await sync.close();
      todos.close();
    },
  };
};

export default { id: SERVICE, server } satisfies PluginModule;
