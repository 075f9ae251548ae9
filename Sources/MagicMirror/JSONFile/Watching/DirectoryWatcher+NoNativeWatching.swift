import Dispatch
import Foundation
import Synchronization

// Elsewhere: no native mechanism; every directory is polled.

#if !canImport(Glibc) && !canImport(Darwin)
extension DirectoryWatcher.Core {
    struct NativeState: ~Copyable {}

    func addNative(_ directory: String, state: inout State) -> NativeWatchResult {
        .unavailable
    }

    func removeNative(_ directory: String, state: inout State) {}

    func takeNativeSources(_ state: inout State) -> [any DispatchSourceProtocol] { [] }
}
#endif
