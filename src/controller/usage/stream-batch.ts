// Kept apart from the meter client (meter-client.ts) so that the usage reporter, which every
// controller runs, can size its batches without loading the client, which only a controller that
// meters does (manager.ts loads it at start when metering is on).

/** Events per v2 meter event stream call (https://docs.stripe.com/api/v2/billing-meter-stream/create). */
export const STREAM_BATCH_MAX = 100;
