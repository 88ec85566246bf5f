/* Zero a buffer with hz_clear, first touch at its start, and list the
 * clearing kernels this CPU has.
 *   cc clear.c $(pkg-config --cflags --libs hugezero) */
#include <stdio.h>
#include <stdlib.h>

#include <hugezero.h>

int main(void)
{
	size_t len = 8u << 20;
	unsigned char *buf = malloc(len);

	if (!buf)
		return 1;
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)i;
	hz_clear(buf, len, buf); /* the start is cleared last: cache-hot */
	for (size_t i = 0; i < len; i++)
		if (buf[i] != 0)
			return 2;
	printf("hugezero %s: %zu bytes cleared with %s\n", hz_version(), len,
	       hz_clear_kernel_for(len));
	for (unsigned i = 0; i < hz_clear_kernel_count(); i++)
		printf("  %s%s\n", hz_clear_kernel_name(i),
		       hz_clear_kernel_supported(i, NULL) ? "" : " (not on this CPU)");
	free(buf);
	return 0;
}
