// Usage accepted by the payment provider after its invoice was finalized. Stripe invoices a
// subscription's metered usage per billing period and finalizes the invoice after a grace period
// (1 hour by default, configurable up to 72 hours): "During the configured finalization grace
// period, you can continue to report usage for the previous billing period"
// (https://docs.stripe.com/billing/subscriptions/usage-based/configure-grace-period). An event
// whose timestamp lies in a period whose grace had ended when it was accepted is recorded by the
// meter and lands on no invoice: the product says so rather than calling it plainly Reported.
import { periodAt, type SubscriptionPeriod } from "./period.js";

/** Stripe's default finalization grace period, and its longest. */
export const DEFAULT_INVOICE_GRACE_SECONDS = 3_600;
export const MAX_INVOICE_GRACE_SECONDS = 72 * 3_600;

/**
 * Whether an event timestamped `eventAt` and accepted at `acceptedAt` came after the invoice of
 * its period was finalized: the period holding `eventAt` (the subscription's, else the calendar
 * month) ended more than `graceSeconds` before `acceptedAt`.
 */
export function acceptedAfterInvoice(input: {
  eventAt: Date;
  acceptedAt: Date;
  subscriptionPeriod?: SubscriptionPeriod | undefined;
  graceSeconds: number;
}): boolean {
  const { periodEnd } = periodAt(input.eventAt, input.subscriptionPeriod);
  return input.acceptedAt.getTime() >= Date.parse(periodEnd) + input.graceSeconds * 1000;
}

/** The UsageAfterInvoice Event's message: what happened and what to do. */
export function usageAfterInvoice(seconds: number, periodEnd: string, graceSeconds: number): string {
  return (
    `${seconds} s of usage were accepted by the payment provider after the invoice of the period ending ` +
    `${periodEnd} was finalized (grace ${graceSeconds} s): they are on no invoice. Bill them by hand ` +
    "(an invoice item), or lengthen the invoice finalization grace period and USAGE_INVOICE_GRACE_SECONDS with it"
  );
}
