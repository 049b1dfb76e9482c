/* A shared object without the plugin entry points. */
int memra_not_a_plugin(void) { return 42; }
