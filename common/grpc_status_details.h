/* grpc_status_details.h - the retry delay a gRPC status asks for. */
#ifndef TP_GRPC_STATUS_DETAILS_H
#define TP_GRPC_STATUS_DETAILS_H

#include <stddef.h>

/*
 * The delay a gRPC status asks for in a google.rpc.RetryInfo among its
 * details, from a grpc-status-details-bin value (base64, padded or not, of
 * a google.rpc.Status): milliseconds, rounded up and cut to a day; 0 for a
 * RetryInfo without a delay; -1 when there is no RetryInfo, or the value
 * is malformed (then nothing in it is believed).  tp_otlp_send retries a
 * RESOURCE_EXHAUSTED that carries one, and waits its delay, like a
 * Retry-After, on any retryable code.
 */
long		tp_grpc_retry_delay_ms(const char *value, size_t len);

#endif
