#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// The operating-system account running this process.
package enum CurrentUser {
    /// The name of the account running the process: the password database's entry for the
    /// effective user id, or `$USER` when there is none (for example in a container whose
    /// user has no `/etc/passwd` line). `nil` when neither is known.
    package static func accountName() -> String? {
        if let name = passwordDatabaseName(), !name.isEmpty { return name }
        if let name = ProcessInfo.processInfo.environment["USER"], !name.isEmpty { return name }
        return nil
    }

    private static func passwordDatabaseName() -> String? {
        let uid = geteuid()
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var size = max(sysconf(Int32(_SC_GETPW_R_SIZE_MAX)), 1024)
        while size <= 1 << 20 {
            var buffer = [CChar](repeating: 0, count: size)
            let status = getpwuid_r(uid, &entry, &buffer, buffer.count, &result)
            if status == ERANGE {
                size *= 2
                continue
            }
            guard status == 0, result != nil, let name = entry.pw_name else { return nil }
            return String(cString: name)
        }
        return nil
    }
}
