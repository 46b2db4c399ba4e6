// A tiny shared object for SharedLibraryTest: what the runtime will do with
// CPU kernels Kiln builds itself (load by path, find an entry, call it).
extern "C" {

int kiln_test_answer() { return 42; }

int kiln_test_counter = 7;

}  // extern "C"
