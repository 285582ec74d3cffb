// java.util.Properties.load, the reference for kproto.config_providers.parse_properties
// (tests/test_config_providers.py). Reads one base64 text a line from stdin, answers one
// line: the entries as base64(key) base64(value) pairs, or ERR.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Properties;
import java.util.TreeSet;

public class PropertiesReference {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Base64.Encoder enc = Base64.getEncoder();
        String line;
        while ((line = in.readLine()) != null) {
            String text = new String(Base64.getDecoder().decode(line), StandardCharsets.UTF_8);
            StringBuilder out = new StringBuilder("OK");
            try {
                Properties p = new Properties();
                p.load(new StringReader(text));
                for (String k : new TreeSet<>(p.stringPropertyNames())) {
                    out.append(' ').append(enc.encodeToString(("k" + k).getBytes(StandardCharsets.UTF_8)))
                       .append(' ').append(enc.encodeToString(("v" + p.getProperty(k)).getBytes(StandardCharsets.UTF_8)));
                }
            } catch (IllegalArgumentException e) {
                out = new StringBuilder("ERR");
            }
            System.out.println(out);
            System.out.flush();
        }
    }
}
