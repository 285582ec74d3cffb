// The reference for tests/test_jaas.py: parses JAAS texts with the JDK's own code.
//
// Reads requests from stdin, one per line, and answers each with one line:
//   "K <base64 UTF-8 text>"  Kafka's grammar for sasl.jaas.config: java.io.StreamTokenizer
//                            set up with the character classes Kafka's JaasConfig gives it,
//                            and its rules (module, flag, key=value pairs, ';'), with each
//                            entry checked by javax.security.auth.login.AppConfigurationEntry.
//   "J <base64 UTF-8 text>"  the JDK's JAAS file parser (sun.security.provider.ConfigFile via
//                            Configuration.getInstance("JavaLoginConfig", URIParameter)), the
//                            text wrapped as "KafkaClient { <text> };".
// Answers: "ERR <reason>" or "OK" then per entry " E <b64 module> <flag> <n>" and n pairs
// " <b64 key or -> <b64 value>" (b64: "b" then base64, so "" is "b") in the order given ("-": Kafka's null key), then flags
// " UNCLOSED" (a quoted string ended by a line end or the end, not by its quote).
import java.io.*;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.security.URIParameter;
import java.util.*;
import javax.security.auth.login.AppConfigurationEntry;
import javax.security.auth.login.AppConfigurationEntry.LoginModuleControlFlag;
import javax.security.auth.login.Configuration;

public class JaasReference {
    /** Remembers the last character handed to the tokenizer. */
    static final class Last extends FilterReader {
        int last = -1;
        Last(Reader in) { super(in); }
        @Override public int read() throws IOException { last = super.read(); return last; }
    }

    static String b64(String s) {
        return "b" + Base64.getEncoder().encodeToString(s.getBytes(StandardCharsets.UTF_8));
    }

    static LoginModuleControlFlag flag(String f) {
        switch (f.toUpperCase(Locale.ROOT)) {
            case "REQUIRED": return LoginModuleControlFlag.REQUIRED;
            case "REQUISITE": return LoginModuleControlFlag.REQUISITE;
            case "SUFFICIENT": return LoginModuleControlFlag.SUFFICIENT;
            case "OPTIONAL": return LoginModuleControlFlag.OPTIONAL;
            default: return null;
        }
    }

    static String kafka(String text) throws IOException {
        Last in = new Last(new StringReader(text));
        StreamTokenizer t = new StreamTokenizer(in);
        t.resetSyntax();
        t.wordChars(32, 128);
        t.wordChars(128 + 32, 255);
        t.ordinaryChar(';');
        t.ordinaryChar('=');
        t.whitespaceChars(0, ' ');
        t.commentChar('/');
        t.quoteChar('"');
        t.quoteChar('\'');
        t.slashSlashComments(true);
        t.slashStarComments(true);
        StringBuilder out = new StringBuilder("OK");
        boolean unclosed = false;
        int entries = 0;
        while (t.nextToken() != StreamTokenizer.TT_EOF) {
            unclosed |= open(t, in);
            String module = t.sval;
            if (t.nextToken() == StreamTokenizer.TT_EOF) return "ERR no-flag";
            unclosed |= open(t, in);
            if (t.sval == null) return "ERR flag-not-a-word";
            LoginModuleControlFlag f = flag(t.sval);
            if (f == null) return "ERR bad-flag";
            List<String[]> pairs = new ArrayList<>();
            Map<String, String> options = new HashMap<>();
            while (t.nextToken() != StreamTokenizer.TT_EOF && t.ttype != ';') {
                unclosed |= open(t, in);
                String key = t.sval;
                if (t.nextToken() != '=' || t.nextToken() == StreamTokenizer.TT_EOF || t.sval == null)
                    return "ERR no-value";
                unclosed |= open(t, in);
                pairs.add(new String[] {key, t.sval});
                options.put(key, t.sval);
            }
            if (t.ttype != ';') return "ERR no-semicolon";
            try {
                new AppConfigurationEntry(module, f, options);
            } catch (IllegalArgumentException e) {
                return "ERR entry";
            }
            entries++;
            out.append(" E ").append(b64(module)).append(' ')
               .append(f.toString().replace("LoginModuleControlFlag: ", ""))
               .append(' ').append(pairs.size());
            for (String[] p : pairs)
                out.append(' ').append(p[0] == null ? "-" : b64(p[0])).append(' ').append(b64(p[1]));
        }
        if (entries == 0) return "ERR empty";
        return out + (unclosed ? " UNCLOSED" : "");
    }

    static int next(StreamTokenizer t, Last in) throws IOException { return t.nextToken(); }

    /** A quoted token whose last character read was not its quote: ended by a line end. */
    static boolean open(StreamTokenizer t, Last in) {
        return (t.ttype == '"' || t.ttype == '\'') && in.last != t.ttype;
    }

    static String jdk(String text, Path dir) throws IOException {
        Path file = Files.createTempFile(dir, "jaas", ".conf");
        try {
            Files.writeString(file, "KafkaClient {\n" + text + "\n};\n", StandardCharsets.UTF_8);
            Configuration c = Configuration.getInstance("JavaLoginConfig",
                                                        new URIParameter(file.toUri()));
            AppConfigurationEntry[] es = c.getAppConfigurationEntry("KafkaClient");
            if (es == null || es.length == 0) return "ERR empty";
            StringBuilder out = new StringBuilder("OK");
            for (AppConfigurationEntry e : es) {
                Map<String, ?> o = e.getOptions();
                out.append(" E ").append(b64(e.getLoginModuleName())).append(' ')
                   .append(e.getControlFlag().toString().replace("LoginModuleControlFlag: ", ""))
                   .append(' ').append(o.size());
                for (Map.Entry<String, ?> p : new TreeMap<String, Object>(o).entrySet())
                    out.append(' ').append(b64(p.getKey())).append(' ')
                       .append(b64(String.valueOf(p.getValue())));
            }
            return out.toString();
        } catch (Exception e) {
            return "ERR " + e.getClass().getSimpleName();
        } finally {
            Files.deleteIfExists(file);
        }
    }

    public static void main(String[] args) throws IOException {
        Path dir = Files.createTempDirectory("jaasref");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            String text = new String(Base64.getDecoder().decode(line.substring(2)), StandardCharsets.UTF_8);
            String answer;
            try {
                answer = line.startsWith("K ") ? kafka(text) : jdk(text, dir);
            } catch (Exception e) {
                answer = "ERR " + e.getClass().getSimpleName();
            }
            out.println(answer);
        }
        Files.deleteIfExists(dir);
    }
}
