/* The process's first allocation made inside a locale call that holds
 * glibc's locale lock for writing (locale_first.c, a constructor that runs
 * before the preload's). Whatever the allocator runs there must take no
 * libc lock the caller may hold: a dlerror() there went through gettext,
 * which released the caller's lock and left it corrupt, and the program's
 * next setlocale, bindtextdomain or newlocale waited forever (postgres,
 * curl, gpg and psql hung at start; run.sh's timeout catches it here).
 * Then the program uses every locale call from two threads, and its own
 * dlerror() finds no error it did not cause. */
#include "hostile.h"

#include <dlfcn.h>
#include <libintl.h>
#include <locale.h>
#include <pthread.h>

int hostile_locale_mid_ran(void);

static void *use_locales(void *arg)
{
	for (int i = 0; i < 100; i++) {
		locale_t l = newlocale(LC_ALL_MASK, "C", (locale_t)0);

		CHECK(l != (locale_t)0, "newlocale: %s", strerror(errno));
		freelocale(l);
		CHECK(setlocale(LC_ALL, "C") != NULL, "setlocale failed");
		CHECK(bindtextdomain("hostile_locale", "/usr/share/locale") != NULL,
		      "bindtextdomain: %s", strerror(errno));
		CHECK(textdomain("hostile_locale") != NULL, "textdomain: %s", strerror(errno));
		CHECK(strcmp(gettext("untranslated"), "untranslated") == 0, "gettext");
	}
	return arg;
}

static int locale_calls_work(void)
{
	pthread_t t;
	const char *err;

	CHECK(hostile_locale_mid_ran() == 1, "the first library's constructor did not run");
	err = dlerror();
	CHECK(err == NULL, "dlerror() reports an error the program did not cause: %s", err);
	CHECK(pthread_create(&t, NULL, use_locales, NULL) == 0, "pthread_create");
	use_locales(NULL);
	CHECK(pthread_join(t, NULL) == 0, "pthread_join");
	hostile_use_new_block(8 * MiB, true);
	printf("locale calls work after the first allocation in a locale call\n");
	return 0;
}

int main(int argc, char **argv)
{
	/* The variant's name is read by locale_first.c's constructor. */
	static const struct hostile_variant variants[] = {
		{ "bindtextdomain", locale_calls_work },
		{ "newlocale", locale_calls_work },
		{ NULL, NULL },
	};
	return hostile_main(argc, argv, variants);
}
