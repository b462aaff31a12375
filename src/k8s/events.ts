// Kubernetes Events (core/v1), so `kubectl describe` and `kubectl get events` tell what happened.
// Recording an Event must never fail a reconcile: errors are logged and dropped.
import { randomBytes } from "node:crypto";
import type { CoreV1Api } from "@kubernetes/client-node";
import type { Logger } from "pino";

export interface EventTarget {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace?: string; uid?: string; resourceVersion?: string };
}

export type EventType = "Normal" | "Warning";

export class EventRecorder {
  constructor(
    private readonly core: CoreV1Api,
    private readonly component: string,
    private readonly log: Logger,
  ) {}

  async record(target: EventTarget, type: EventType, reason: string, message: string): Promise<void> {
    const namespace = target.metadata.namespace ?? "default";
    const now = new Date();
    try {
      await this.core.createNamespacedEvent({
        namespace,
        body: {
          metadata: {
            name: `${target.metadata.name}.${now.getTime().toString(16)}${randomBytes(3).toString("hex")}`,
            namespace,
          },
          involvedObject: {
            apiVersion: target.apiVersion,
            kind: target.kind,
            name: target.metadata.name,
            namespace,
            uid: target.metadata.uid,
          },
          reason,
          message: message.slice(0, 1024),
          type,
          source: { component: this.component },
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
          reportingComponent: this.component,
        },
      });
    } catch (err) {
      this.log.warn({ err: (err as Error).message, reason }, "could not record event");
    }
  }
}
