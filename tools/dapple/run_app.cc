// The one catch block of `dapple` and `dapple-torch`: see run_app.h.
#include "run_app.h"

#include <cstdio>
#include <exception>

#include "commands.h"
#include "dapple/common/error.h"

namespace dapple {

int& CommandExitCode() {
  static int code = 0;
  return code;
}

int RunApp(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const ReportedElsewhere&) {
    return 2;
  } catch (const InputError& e) {
    std::fprintf(stderr, "dapple: error: %s\n", e.what());
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "dapple: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dapple: internal error: %s\n", e.what());
    return 1;
  }
  return CommandExitCode();
}

}  // namespace dapple
