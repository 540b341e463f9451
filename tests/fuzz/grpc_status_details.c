/*
 * grpc_status_details.c - libFuzzer target for tp_grpc_retry_delay_ms(),
 * which reads a collector's grpc-status-details-bin trailer (base64 of a
 * google.rpc.Status) in the OTLP exporter's background worker.
 *
 * Each input is read twice: as the header value itself (any bytes, not
 * NUL-terminated, exactly as long as the input so that ASan sees a read
 * past its end), and base64-encoded, padded and not, so that the fuzzer
 * reaches the protobuf reader with bytes of its own choosing.
 * Invariants: no crash, no read out of bounds; the answer is -1 (no
 * RetryInfo, or malformed), 0 (a RetryInfo without a delay) or a delay of
 * at most a day; padded and unpadded base64 of the same bytes agree.
 */
#include "../base64_encode.h"
#include "fuzz.h"
#include "grpc_status_details.h"

#define DAY_MS (24 * 3600 * 1000L)

/* Inputs whose base64 stays under the reader's 16 kB limit. */
#define MAX_ENCODED_INPUT 12000

static void
check_delay(long ms)
{
	FUZZ_CHECK(ms >= -1 && ms <= DAY_MS);
}

/* Standard base64 of data, padded or not, in a buffer exactly as long. */
static char *
base64(const uint8_t *data, size_t size, int padded, size_t *len)
{
	size_t		n = test_base64_len(size, padded);
	char	   *out = malloc(n > 0 ? n : 1);

	FUZZ_CHECK(out != NULL);
	FUZZ_CHECK(test_base64(data, size, padded, out) == n);
	*len = n;
	return out;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *padded;
	char	   *bare;
	size_t		padded_len;
	size_t		bare_len;
	long		a;
	long		b;

	check_delay(tp_grpc_retry_delay_ms((const char *) data, size));

	if (size > MAX_ENCODED_INPUT)
		return 0;
	padded = base64(data, size, 1, &padded_len);
	bare = base64(data, size, 0, &bare_len);
	a = tp_grpc_retry_delay_ms(padded, padded_len);
	b = tp_grpc_retry_delay_ms(bare, bare_len);
	check_delay(a);
	FUZZ_CHECK(a == b);
	free(padded);
	free(bare);
	return 0;
}
