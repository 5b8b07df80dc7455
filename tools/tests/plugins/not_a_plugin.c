/* A shared library without the ABI's symbols: loading it must fail with a clear reason. */
int not_attncheck(void) { return 0; }
