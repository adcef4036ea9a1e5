// Catches any C++ exception a plugin lets escape from a PJRT C API entry.
//
// The C API promises that entries return errors, not exceptions, but plugins have been
// seen to throw (e.g. std::length_error on a negative XLA option value). An exception
// unwinding into Rust frames aborts the process, so every call into a plugin goes through
// rpjrt_guarded_call, which calls the entry inside a try block and reports an escaped
// exception as a flag plus its what() text. When nothing is thrown this costs one extra
// direct call: C++ try blocks are free on the non-throwing path (table-based unwinding).

#include <dlfcn.h>

#include <exception>
#include <stdexcept>
#include <string>

namespace {

// The what() text of the last exception caught on this thread.
thread_local std::string last_what;

}  // namespace

// Runs `call` inside a try block: on an exception sets `*threw`, keeps its what() text in
// last_what and returns a null pointer; otherwise returns what `call` returned.
template <typename Call>
auto guarded(Call call, int* threw) -> decltype(call()) {
  try {
    return call();
  } catch (const std::exception& e) {
    *threw = 1;
    try {
      last_what = e.what();
    } catch (...) {
      last_what.clear();
    }
  } catch (...) {
    *threw = 1;
    last_what = "an exception that is not a std::exception";
  }
  return nullptr;
}

extern "C" void* rpjrt_guarded_call(void* (*entry)(void*), void* args, int* threw) {
  return guarded([&] { return entry(args); }, threw);
}

// Opens a shared library (dlopen) inside a try block: a library whose static initialiser
// throws reports the exception here instead of ending the process in the unwinder. The C
// library declares dlopen noexcept for C++, so it is called through a pointer of a type
// without that promise, or the compiler would turn any exception into std::terminate.
extern "C" void* rpjrt_guarded_dlopen(const char* path, int flags, int* threw) {
  using OpenFn = void* (*)(const char*, int);
  OpenFn volatile open = reinterpret_cast<OpenFn>(&dlopen);
  return guarded([&] { return open(path, flags); }, threw);
}

// Calls a plugin's GetPjrtApi (no arguments) inside a try block, as rpjrt_guarded_call
// does for the table's entries.
extern "C" const void* rpjrt_guarded_get_api(const void* (*entry)(), int* threw) {
  return guarded([&] { return entry(); }, threw);
}

// The what() text of the exception the last guarded call on this thread caught.
extern "C" const char* rpjrt_guard_last_what() { return last_what.c_str(); }

// For rpjrt's own tests: an "entry" that throws, as a misbehaving plugin would.
extern "C" void* rpjrt_guard_test_throw(void* args) {
  if (args != nullptr) throw std::length_error("vector::_M_default_append");
  throw 42;
}
