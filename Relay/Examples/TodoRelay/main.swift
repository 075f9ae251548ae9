// mirror-todo-relay: mirror-todo's shared to-do list through a mirror-relay, so that terminals
// of many users, anywhere, edit one list live with no database role of their own.
//
//     export MAGICMIRROR_RELAY_URL=http://127.0.0.1:8080
//     export MAGICMIRROR_RELAY_TOKEN=$(mirror-relay token --subject alice)
//     mirror-todo-relay watch                 # in one terminal
//     mirror-todo-relay add "Buy milk"        # in another
//
// The console is mirror-todo's own (TodoConsoleKit in the root package); only where the
// list lives differs: `--relay URL`, else $MAGICMIRROR_RELAY_URL. The token comes from
// $MAGICMIRROR_RELAY_TOKEN only, never from the command line (which other users can see).
import Foundation
import MagicMirror
import MagicMirrorRelay
import TodoConsoleKit

// A write to a connection the relay closed raises SIGPIPE; get the error instead.
signal(SIGPIPE, SIG_IGN)

/// The subject of a token (its payload's `sub`), read without checking the signature: the
/// relay checks it; here it only names the owner of the private list.
func subject(ofToken token: String) -> String? {
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3 else { return nil }
    var text = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    text += String(repeating: "=", count: (4 - text.count % 4) % 4)
    guard let data = Data(base64Encoded: text),
          let payload = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
    else { return nil }
    return payload["sub"] as? String
}

let relay = TodoStorage(
    option: "--relay", placeholder: "URL",
    help: "the relay, http(s)://HOST:PORT (default: $MAGICMIRROR_RELAY_URL;\nthe token from $MAGICMIRROR_RELAY_TOKEN)"
) { value in
    let environment = ProcessInfo.processInfo.environment
    func nonEmpty(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
    guard let text = value ?? nonEmpty("MAGICMIRROR_RELAY_URL") else {
        throw MirrorError(.unavailable, "no relay: pass --relay URL or set MAGICMIRROR_RELAY_URL")
    }
    guard let url = URL(string: text), url.scheme == "http" || url.scheme == "https", url.host != nil else {
        throw MirrorError(.unsupportedFormat, "\(text) is not a relay's URL (http://HOST:PORT or https://HOST)")
    }
    guard let token = nonEmpty("MAGICMIRROR_RELAY_TOKEN") else {
        throw MirrorError(
            .permissionDenied,
            "no token: set MAGICMIRROR_RELAY_TOKEN (for a relay of your own: mirror-relay token --subject USER)")
    }
    guard let user = subject(ofToken: token) else {
        throw MirrorError(.permissionDenied, "MAGICMIRROR_RELAY_TOKEN is not a token (header.payload.signature, with a sub)")
    }
    // The private list belongs to the token's subject: the only user the relay acts for.
    let owner = try MirrorUser(name: user)
    let database = RelayDatabase(url: url, user: owner) { token }
    return TodoStorage.Opened(database: database, location: text, privateUser: owner)
}

await TodoConsole.main(program: "mirror-todo-relay", storage: relay)
