/* fork while fork handlers allocate large blocks. A library's handlers,
 * registered from its constructor before the preload started
 * (atfork_lib.c), allocate, grow and free 4 MiB in the prepare, parent or
 * child handler, after large blocks were freed and reused; with every
 * handler, the prepare handler also frees a block the program allocated
 * before the fork. glibc takes its
 * own malloc locks inside fork after every prepare handler has run and
 * releases them before the parent and child handlers, so each position
 * works there; so must it under the preload. */
#include "hostile.h"

#include <sys/wait.h>
#include <unistd.h>

extern int atfork_large, atfork_ran;
extern void *atfork_block;

static int fork_with(int bits)
{
	pid_t pid;

	hostile_recycle(16 * MiB, 4, 0);
	atfork_large = bits;
	for (int round = 0; round < 3; round++) {
		fflush(NULL);
		atfork_ran = 0;
		if (bits & 8) {
			atfork_block = malloc(24 * MiB);
			CHECK(atfork_block != NULL, "malloc: %s", strerror(errno));
			memset(atfork_block, 9, 24 * MiB);
		}
		pid = fork();
		CHECK(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			char *p = malloc(8 * MiB);

			memset(hostile_keep(p), 3, 8 * MiB);
			free(p);
			_exit(atfork_ran == (bits & 5) ? 0 : 3);
		}
		CHECK(hostile_wait(pid) == 0, "round %d: the child's handlers or allocation failed",
		      round);
		CHECK(atfork_ran == (bits & 3), "round %d: the parent's handlers ran %#x of %#x",
		      round, atfork_ran, bits & 3);
		hostile_recycle(16 * MiB, 4, 0);
	}
	printf("fork with handlers %#x allocating large blocks worked\n", bits);
	return 0;
}

static int v_prepare(void) { return fork_with(1); }
static int v_parent(void) { return fork_with(2); }
static int v_child(void) { return fork_with(4); }
static int v_all(void) { return fork_with(15); }

int main(int argc, char **argv)
{
	static const struct hostile_variant variants[] = {
		{ "prepare", v_prepare },
		{ "parent", v_parent },
		{ "child", v_child },
		{ "all", v_all },
		{ NULL, NULL },
	};
	return hostile_main(argc, argv, variants);
}
