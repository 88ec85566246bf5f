#include "../include/hugezero.h"

HZ_API const char *hz_version(void)
{
	return HZ_VERSION;
}
