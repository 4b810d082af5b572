// Runs seed 000's mysimhash (test/mysimhash.java, copied unchanged from the seed) over documents.
// Input: one document per line, each UTF-16 unit as 4 hex digits (so lone surrogates, NUL and
// newlines survive); an empty line is the empty document. Output: one strSimHash per line
// (bit 0 first). Usage: java Seed000Harness HASHBITS < docs.hex
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;

public class Seed000Harness {
    public static void main(String[] args) throws Exception {
        int bits = args.length > 0 ? Integer.parseInt(args[0]) : 64;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        PrintWriter out = new PrintWriter(System.out);
        String line;
        while ((line = in.readLine()) != null) {
            char[] units = new char[line.length() / 4];
            for (int i = 0; i < units.length; i++) {
                units[i] = (char) Integer.parseInt(line.substring(4 * i, 4 * i + 4), 16);
            }
            out.println(new test.mysimhash(new String(units), bits).strSimHash);
        }
        out.flush();
    }
}
