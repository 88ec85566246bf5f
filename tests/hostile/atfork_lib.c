/* A library that registers fork handlers from its constructor, which runs
 * before the preload starts (the program's first malloc comes later), so
 * its handlers are registered before hugezero's. Each handler allocates
 * and frees a large block when the program asks it to (atfork_large). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Which handlers allocate: bits 1 prepare, 2 parent, 4 child; bit 8: the
 * prepare handler also frees atfork_block, a block the program allocated
 * before fork. */
int atfork_large;
void *atfork_block;
/* What the handlers did, read back by the program. */
int atfork_ran;

static void use_large(int bit)
{
	char *p;

	if (!(atfork_large & bit))
		return;
	p = malloc((size_t)4 << 20);
	if (p == NULL)
		return;
	memset(p, bit, (size_t)4 << 20);
	p = realloc(p, (size_t)6 << 20);
	if (p != NULL && p[(4 << 20) - 1] == bit)
		atfork_ran |= bit;
	free(p);
}

static void prepare(void)
{
	use_large(1);
	if (atfork_large & 8) {
		free(atfork_block);
		atfork_block = NULL;
	}
}

static void parent(void) { use_large(2); }
static void child(void) { use_large(4); }

__attribute__((constructor)) static void register_handlers(void)
{
	pthread_atfork(prepare, parent, child);
}
