/* A library whose constructor makes the process's first allocation inside
 * a locale call, holding one of glibc's locale locks for writing, as
 * libgpg-error's bindtextdomain (postgres, gpg) and p11-kit's newlocale
 * (curl, wget, psql) do. It must run before the preload's constructor
 * (which would otherwise make the first allocation), so it is a dependency
 * of a dependency of the program (locale_mid.c): ld.so runs the deepest
 * objects' constructors first. The program's argv[1] names the call. */
#include <libintl.h>
#include <locale.h>
#include <string.h>

static locale_t made;
static int ran;

/* glibc passes a constructor the program's argc, argv and envp. */
__attribute__((constructor)) static void first_allocation(int argc, char **argv, char **envp)
{
	(void)envp;
	if (argc > 1 && strcmp(argv[1], "newlocale") == 0)
		made = newlocale(LC_ALL_MASK, "C.UTF-8", (locale_t)0);
	else
		(void)bindtextdomain("hostile_locale_first", "/usr/share/locale");
	ran = 1;
}

int hostile_locale_first_ran(void)
{
	if (made != (locale_t)0)
		freelocale(made);
	made = (locale_t)0;
	return ran;
}
