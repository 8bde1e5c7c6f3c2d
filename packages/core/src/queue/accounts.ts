// Who owns a file and with which mode, as the messages that tell an operator what to chown or
// chmod say it.
import fs from "node:fs"

/** `owned by nobody (uid 65534) with mode 0600`. */
export function ownerOf(st: fs.Stats): string {
  return `owned by ${accountOf(st.uid).text} with mode ${modeOf(st)}`
}

/** A file's permission bits as chmod takes them: `0640`. */
export function modeOf(st: fs.Stats): string {
  return `0${(st.mode & 0o7777).toString(8).padStart(3, "0")}`
}

/** A user as messages name it (`nobody (uid 65534)`) and as chown takes it. */
export function accountOf(uid: number): { readonly text: string; readonly chown: string } {
  try {
    for (const line of fs.readFileSync("/etc/passwd", "utf8").split("\n")) {
      const [name, , id] = line.split(":")
      if (id === String(uid) && name) return { text: `${name} (uid ${uid})`, chown: name }
    }
  } catch {}
  return { text: `uid ${uid}`, chown: String(uid) }
}
