/* The program's dependency that depends on locale_first.c, so that
 * library's constructor runs before every other (see there). */
int hostile_locale_first_ran(void);

int hostile_locale_mid_ran(void)
{
	return hostile_locale_first_ran();
}
